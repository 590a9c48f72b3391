// Checked integer arithmetic for sizes that come from files or requests.
#pragma once

#include <cstdint>
#include <limits>

#include "core/error.h"

namespace ninfer {

inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
    int64_t result = 0;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &result))
        fail_invalid(what, ": size overflow or negative (", a, " * ", b, ")");
    return result;
}

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
    int64_t result = 0;
    if (__builtin_add_overflow(a, b, &result)) fail_invalid(what, ": size overflow");
    return result;
}

inline int32_t checked_i32(int64_t value, const char* what) {
    if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
        fail_invalid(what, ": value ", value, " does not fit in 32 bits");
    return static_cast<int32_t>(value);
}

} // namespace ninfer
