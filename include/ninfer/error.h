// ninfer::Error: the one exception type of the library. Every failure carries a category (the
// server maps it to an HTTP status) and a message that names the op, tensor, file or option.
#pragma once

#include <stdexcept>
#include <string>

namespace ninfer {

enum class ErrorCategory { InvalidArgument, Unsupported, OutOfMemory, Io, Cuda, Internal };

const char* error_category_name(ErrorCategory category);

class Error : public std::runtime_error {
public:
    Error(ErrorCategory category, const std::string& message)
        : std::runtime_error(message), category_(category) {}
    ErrorCategory category() const { return category_; }

private:
    ErrorCategory category_;
};

} // namespace ninfer
