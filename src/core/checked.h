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

// An int64 count or byte size whose + and * fail with a clear error instead of
// wrapping: for the sizes derived from config fields (parameter counts, plan bytes).
struct Size {
    int64_t v = 0;
    constexpr Size() = default;
    constexpr Size(int64_t value) : v(value) {} // NOLINT: implicit from plain integers
    explicit operator int64_t() const { return v; }
    Size& operator+=(Size o) { return *this = *this + o; }
    friend Size operator+(Size a, Size b) { return checked_add(a.v, b.v, "config-derived size"); }
    friend Size operator*(Size a, Size b) { return checked_mul(a.v, b.v, "config-derived size"); }
    friend Size operator/(Size a, Size b) {
        if (b.v <= 0) fail_invalid("config-derived size: division by ", b.v);
        return a.v / b.v;
    }
    friend Size operator-(Size a, Size b) {
        int64_t result = 0;
        if (__builtin_sub_overflow(a.v, b.v, &result)) fail_invalid("config-derived size: overflow");
        return result;
    }
};

} // namespace ninfer
