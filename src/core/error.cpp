#include "core/error.h"

namespace ninfer {

const char* error_category_name(ErrorCategory category) {
    switch (category) {
    case ErrorCategory::InvalidArgument:
        return "invalid_argument";
    case ErrorCategory::Unsupported:
        return "unsupported";
    case ErrorCategory::OutOfMemory:
        return "out_of_memory";
    case ErrorCategory::Io:
        return "io";
    case ErrorCategory::Cuda:
        return "cuda";
    case ErrorCategory::Internal:
        return "internal";
    }
    return "unknown";
}

} // namespace ninfer
