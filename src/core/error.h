// Helpers for raising ninfer::Error. Library code never calls exit() or abort().
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "ninfer/error.h"

namespace ninfer {

// Concatenates its arguments with operator<< into one message.
template <typename... Args> std::string concat(Args&&... args) {
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    return out.str();
}

template <typename... Args> [[noreturn]] void fail(ErrorCategory category, Args&&... args) {
    throw Error(category, concat(std::forward<Args>(args)...));
}

template <typename... Args> [[noreturn]] void fail_invalid(Args&&... args) {
    fail(ErrorCategory::InvalidArgument, std::forward<Args>(args)...);
}

// require(cond, ...) raises InvalidArgument with the message when cond is false.
template <typename... Args> void require(bool condition, Args&&... args) {
    if (!condition) fail(ErrorCategory::InvalidArgument, std::forward<Args>(args)...);
}

} // namespace ninfer
