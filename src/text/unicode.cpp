#include "text/unicode.h"

#include <cstdlib>
#include <utf8proc.h>

#include "core/error.h"

namespace ninfer::text {
namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if invalid, -1 if truncated at the end.
int sequence_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    int n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; // no overlong forms
        if (c == 0xED) hi = 0x9F; // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F; // <= U+10FFFF
    } else {
        return 0;
    }
    for (int k = 1; k < n; ++k) {
        if (i + k >= s.size()) return -1;
        const unsigned char x = b(i + k);
        if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF)) return 0;
    }
    return n;
}

// Number of bytes of the maximal invalid subpart at s[i] (at least 1).
size_t invalid_subpart(std::string_view s, size_t i) {
    // A maximal subpart is the longest prefix of a well-formed sequence: grow while the
    // truncated prefix stays valid.
    size_t best = 1;
    for (size_t len = 2; len <= 3 && i + len <= s.size(); ++len) {
        std::string_view prefix = s.substr(i, len);
        if (sequence_length(prefix, 0) == -1)
            best = len;
        else
            break;
    }
    return best;
}

} // namespace

void require_utf8(std::string_view s, const char* what) {
    for (size_t i = 0; i < s.size();) {
        const int n = sequence_length(s, i);
        if (n <= 0) fail_invalid(what, ": invalid UTF-8 at byte ", i);
        i += size_t(n);
    }
}

size_t valid_utf8_prefix(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const int n = sequence_length(s, i);
        if (n <= 0) break;
        i += size_t(n);
    }
    return i;
}

std::string utf8_lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const int n = sequence_length(s, i);
        if (n > 0) {
            out.append(s.substr(i, size_t(n)));
            i += size_t(n);
        } else {
            out += "\xEF\xBF\xBD";
            i += n == -1 ? s.size() - i : invalid_subpart(s, i);
        }
    }
    return out;
}

std::vector<char32_t> to_code_points(std::string_view s) {
    std::vector<char32_t> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        utf8proc_int32_t cp = 0;
        const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                        utf8proc_ssize_t(s.size() - i), &cp);
        if (n <= 0) fail(ErrorCategory::Internal, "to_code_points: invalid UTF-8");
        out.push_back(char32_t(cp));
        i += size_t(n);
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    utf8proc_uint8_t buf[4];
    const auto n = utf8proc_encode_char(utf8proc_int32_t(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), size_t(n));
}

std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
    return out;
}

std::string nfc(std::string_view s) {
    bool ascii = true;
    for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(s);
    utf8proc_uint8_t* dst = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                utf8proc_ssize_t(s.size()), &dst,
                                utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) fail_invalid("NFC normalisation failed: ", utf8proc_errmsg(n));
    std::string out(reinterpret_cast<const char*>(dst), size_t(n));
    std::free(dst);
    return out;
}

bool is_py_space(char32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(cp));
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars) {
    const std::vector<char32_t> cps = to_code_points(s);
    std::vector<char32_t> set;
    if (chars) set = to_code_points(*chars);
    const auto strip_it = [&](char32_t c) {
        if (!chars) return is_py_space(c);
        for (char32_t x : set)
            if (x == c) return true;
        return false;
    };
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && strip_it(cps[b])) ++b;
    if (right)
        while (e > b && strip_it(cps[e - 1])) --e;
    return from_code_points(cps, b, e);
}

namespace {
template <typename F> std::string map_chars(std::string_view s, F f) {
    std::string out;
    for (char32_t c : to_code_points(s)) append_utf8(out, f(c));
    return out;
}
bool is_cased_letter(char32_t c) {
    const auto cat = utf8proc_category(utf8proc_int32_t(c));
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT;
}
} // namespace

std::string py_upper(std::string_view s) {
    return map_chars(s, [](char32_t c) { return char32_t(utf8proc_toupper(utf8proc_int32_t(c))); });
}

std::string py_lower(std::string_view s) {
    return map_chars(s, [](char32_t c) { return char32_t(utf8proc_tolower(utf8proc_int32_t(c))); });
}

std::string py_title(std::string_view s) {
    bool prev_cased = false;
    return map_chars(s, [&](char32_t c) {
        const bool cased = is_cased_letter(c);
        const char32_t r = cased ? char32_t(prev_cased ? utf8proc_tolower(utf8proc_int32_t(c))
                                                       : utf8proc_totitle(utf8proc_int32_t(c)))
                                 : c;
        prev_cased = cased;
        return r;
    });
}

std::string py_capitalize(std::string_view s) {
    bool first = true;
    return map_chars(s, [&](char32_t c) {
        const char32_t r = first ? char32_t(utf8proc_totitle(utf8proc_int32_t(c)))
                                 : char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
        first = false;
        return r;
    });
}

} // namespace ninfer::text
