// Scalar frames of the JSON matcher: string bodies (UTF-8 and escapes, lengths, object keys),
// numbers (grammar, digit limits, bounds) and literals (enum/const/true/false/null).
#include <cmath>
#include <cstdlib>
#include <string>

#include "text/json_matcher.h"

namespace ninfer::text::json::detail {
namespace {

enum StringPhase : uint8_t { kNormal, kEscape, kHex, kLowBackslash, kLowU, kLowHex };
enum NumberPhase : uint8_t { kInit, kMinus, kZero, kInt, kDot, kFrac, kE, kESign, kExp };
constexpr uint32_t kMaxDigits = 18;
constexpr uint64_t kFnvPrime = 1099511628211ull;

int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// One decoded byte of an object key: hash, and narrow the declared names that match so far.
void key_byte(Frame& f, const Node& obj, uint8_t b) {
    f.h = (f.h ^ b) * kFnvPrime;
    if (f.b < f.c)
        narrow([&](uint32_t i) -> const std::string& { return obj.props[obj.by_name[i]].name; },
               f.b, f.c, f.a, b);
    ++f.a;
}

void key_code_point(Frame& f, const Node& obj, uint32_t cp) {
    uint8_t buf[4];
    int n = 0;
    if (cp < 0x80) {
        buf[n++] = uint8_t(cp);
    } else if (cp < 0x800) {
        buf[n++] = uint8_t(0xC0 | cp >> 6), buf[n++] = uint8_t(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        buf[n++] = uint8_t(0xE0 | cp >> 12), buf[n++] = uint8_t(0x80 | (cp >> 6 & 0x3F));
        buf[n++] = uint8_t(0x80 | (cp & 0x3F));
    } else {
        buf[n++] = uint8_t(0xF0 | cp >> 18), buf[n++] = uint8_t(0x80 | (cp >> 12 & 0x3F));
        buf[n++] = uint8_t(0x80 | (cp >> 6 & 0x3F)), buf[n++] = uint8_t(0x80 | (cp & 0x3F));
    }
    for (int i = 0; i < n; ++i) key_byte(f, obj, buf[i]);
}

long double pow10l(uint32_t k) {
    long double p = 1;
    for (uint32_t i = 0; i < k; ++i) p *= 10;
    return p;
}

// Whether some completion of the number prefix in `f` lies within the node's bounds.
bool feasible(const Frame& f, const Node& n) {
    const bool neg = f.aux != 0;
    if (n.kind == NodeKind::Integer) {
        const __int128 lo = n.ilo, hi = n.ihi;
        auto overlap = [&](__int128 a, __int128 b) { // [a, b] (positive), mirrored when neg
            return neg ? (-b <= hi && -a >= lo) : (a <= hi && b >= lo);
        };
        if (f.phase == kMinus) return overlap(0, __int128(999999999999999999));
        if (f.phase == kZero) return overlap(0, 0);
        __int128 p = f.h, width = 1;
        for (uint32_t k = f.a; k <= kMaxDigits; ++k, p *= 10, width *= 10)
            if (overlap(p, p + width - 1)) return true;
        return false;
    }
    // Number: bounds widened by a quarter of the gap to the neighbouring doubles, so that a
    // value inside them parses (rounds to nearest) to a double within the real bounds.
    auto widen = [](double v, bool up) {
        const double gap =
            std::min(v - std::nextafter(v, -INFINITY), std::nextafter(v, INFINITY) - v);
        return (long double)v + (up ? 1 : -1) * (long double)gap / 4;
    };
    const long double lo = n.has_lo ? widen(n.lo, false) : -INFINITY;
    const long double hi = n.has_hi ? widen(n.hi, true) : INFINITY;
    // The reachable values [x0, x1) (a point when x0 == x1), negated when neg.
    auto overlap = [&](long double x0, long double x1) {
        if (x0 == x1) return neg ? (-x0 >= lo && -x0 <= hi) : (x0 >= lo && x0 <= hi);
        return neg ? (-x0 >= lo && -x1 < hi) : (x0 <= hi && x1 > lo);
    };
    if (f.phase == kMinus) return overlap(0, 1e18L);
    if (f.phase == kDot || f.phase == kFrac) {
        const long double x0 = (long double)f.h + (long double)f.g / pow10l(f.b);
        return overlap(x0, f.b >= kMaxDigits ? x0 : x0 + 1 / pow10l(f.b));
    }
    if (f.phase == kZero) return overlap(0, 1);
    long double p = (long double)f.h, width = 1;
    for (uint32_t k = f.a; k <= kMaxDigits; ++k, p *= 10, width *= 10)
        if (overlap(p, p + width)) return true;
    return false;
}

} // namespace

Step string_step(Frame& f, const Node& n, uint8_t c) {
    const bool key = f.kind == FrameKind::Key;
    auto count = [&] { // one more code point
        if (key) return true;
        if (f.a >= n.max_length) return false;
        ++f.a;
        return true;
    };
    switch (f.phase) {
    case kNormal: {
        if (f.ws == 0) {
            if (c == '"') return key || f.a >= n.min_length ? Step::Closed : Step::Dead;
            if (c == '\\') {
                if (!count()) return Step::Dead;
                f.phase = kEscape;
                return Step::Continue;
            }
            if (c < 0x20) return Step::Dead;
        }
        const uint8_t next = utf8_step(f.ws, c);
        if (next == kUtf8Invalid || (f.ws == 0 && !count())) return Step::Dead;
        f.ws = next;
        if (key) key_byte(f, n, c);
        return Step::Continue;
    }
    case kEscape: {
        uint8_t decoded = 0;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            decoded = c;
            break;
        case 'b':
            decoded = '\b';
            break;
        case 'f':
            decoded = '\f';
            break;
        case 'n':
            decoded = '\n';
            break;
        case 'r':
            decoded = '\r';
            break;
        case 't':
            decoded = '\t';
            break;
        case 'u':
            f.phase = kHex, f.aux = 0, f.g = 0;
            return Step::Continue;
        default:
            return Step::Dead;
        }
        if (key) key_byte(f, n, decoded);
        f.phase = kNormal;
        return Step::Continue;
    }
    case kHex: {
        const int v = hex_value(c);
        if (v < 0 || (f.aux == 1 && f.g == 0xD && v >= 0xC)) return Step::Dead; // lone DC00..DFFF
        f.g = f.g * 16 + uint64_t(v);
        if (++f.aux < 4) return Step::Continue;
        if (f.g >= 0xD800 && f.g <= 0xDBFF) {
            f.phase = kLowBackslash; // a high surrogate: its low half must follow
            return Step::Continue;
        }
        if (key) key_code_point(f, n, uint32_t(f.g));
        f.phase = kNormal, f.g = 0;
        return Step::Continue;
    }
    case kLowBackslash:
        if (c != '\\') return Step::Dead;
        f.phase = kLowU;
        return Step::Continue;
    case kLowU:
        if (c != 'u') return Step::Dead;
        f.phase = kLowHex, f.aux = 0;
        return Step::Continue;
    case kLowHex: {
        const int v = hex_value(c);
        if (v < 0 || (f.aux == 0 && v != 0xD) || (f.aux == 1 && v < 0xC)) return Step::Dead;
        const uint64_t low = (f.g >> 16) * 16 + uint64_t(v);
        f.g = (f.g & 0xFFFF) | low << 16;
        if (++f.aux < 4) return Step::Continue;
        if (key)
            key_code_point(f, n,
                           0x10000 + ((uint32_t(f.g & 0xFFFF) - 0xD800) << 10) +
                               (uint32_t(low) - 0xDC00));
        f.phase = kNormal, f.g = 0;
        return Step::Continue;
    }
    default:
        return Step::Dead;
    }
}

bool number_complete(const Frame& f, const Node& n) {
    if (f.phase != kZero && f.phase != kInt && f.phase != kFrac && f.phase != kExp) return false;
    if (n.kind == NodeKind::Integer) {
        const int64_t v = f.aux ? -int64_t(f.h) : int64_t(f.h);
        return v >= n.ilo && v <= n.ihi;
    }
    if (!n.has_lo && !n.has_hi) return true;
    std::string text = (f.aux ? "-" : "") + std::to_string(f.h);
    if (f.phase == kFrac) {
        const std::string frac = std::to_string(f.g);
        text += "." + std::string(f.b - frac.size(), '0') + frac;
    }
    const double v = std::strtod(text.c_str(), nullptr); // what a JSON parser reads
    return (!n.has_lo || v >= n.lo) && (!n.has_hi || v <= n.hi);
}

Step number_step(Frame& f, const Node& n, uint8_t c) {
    const bool integer = n.kind == NodeKind::Integer;
    const bool bounded = integer || n.has_lo || n.has_hi;
    const bool digit = c >= '0' && c <= '9';
    const uint32_t d = uint32_t(c - '0');
    auto check = [&] { return !bounded || feasible(f, n) ? Step::Continue : Step::Dead; };
    auto end = [&] { return number_complete(f, n) ? Step::Ended : Step::Dead; };
    const bool exponent = (c == 'e' || c == 'E') && !bounded;
    switch (f.phase) {
    case kInit:
        if (c == '-') {
            f.aux = 1, f.phase = kMinus;
            return check();
        }
        [[fallthrough]];
    case kMinus:
        if (!digit) return Step::Dead;
        f.a = 1, f.h = d, f.phase = d == 0 ? kZero : kInt;
        return check();
    case kZero:
    case kInt:
        if (digit) {
            if (f.phase == kZero || f.a >= kMaxDigits) return Step::Dead;
            f.h = f.h * 10 + d, ++f.a;
            return check();
        }
        if (c == '.' && !integer) {
            f.phase = kDot;
            return check();
        }
        if (exponent) {
            f.phase = kE;
            return Step::Continue;
        }
        return end();
    case kDot:
    case kFrac:
        if (digit) {
            if (f.b >= kMaxDigits) return Step::Dead;
            f.g = f.g * 10 + d, ++f.b, f.phase = kFrac;
            return check();
        }
        if (f.phase == kDot) return Step::Dead;
        if (exponent) {
            f.phase = kE;
            return Step::Continue;
        }
        return end();
    case kE:
        if (c == '+' || c == '-') {
            f.phase = kESign;
            return Step::Continue;
        }
        [[fallthrough]];
    case kESign:
        if (!digit) return Step::Dead;
        f.c = 1, f.phase = kExp;
        return Step::Continue;
    case kExp:
        if (digit) {
            if (f.c >= 2) return Step::Dead;
            ++f.c;
            return Step::Continue;
        }
        return Step::Ended;
    default:
        return Step::Dead;
    }
}

bool literal_complete(const Frame& f, const std::vector<std::string>& texts) {
    return f.a > 0 && texts[f.b].size() == f.a;
}

Step literal_step(Frame& f, const std::vector<std::string>& texts, uint8_t c) {
    const bool complete = literal_complete(f, texts);
    uint32_t lo = f.b, hi = f.c;
    narrow([&](uint32_t i) -> const std::string& { return texts[i]; }, lo, hi, f.a, c);
    if (lo == hi) return complete ? Step::Ended : Step::Dead;
    f.b = lo, f.c = hi, ++f.a;
    return hi - lo == 1 && texts[lo].size() == f.a ? Step::Closed : Step::Continue;
}

} // namespace ninfer::text::json::detail
