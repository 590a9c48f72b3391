// UTF-8 and Unicode helpers of the text layer. Unicode data (normalisation, categories, bidi
// classes) comes from utf8proc; nothing here carries its own Unicode tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::text {

// Raises ninfer::Error (InvalidArgument) naming `what` and the byte offset when `s` is not valid
// UTF-8 (overlong forms, surrogates and code points above U+10FFFF are invalid).
void require_utf8(std::string_view s, const char* what);

// Length in bytes of the complete, valid UTF-8 prefix of `s`; the rest is an incomplete
// sequence that may still be completed by more bytes, or invalid bytes.
size_t valid_utf8_prefix(std::string_view s);

// Decodes `bytes` like Rust's String::from_utf8_lossy / Python's errors="replace": every maximal
// invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Decodes valid UTF-8 into code points (the input must be valid).
std::vector<char32_t> to_code_points(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end);

// NFC normalisation of valid UTF-8 (utf8proc). ASCII-only input is returned unchanged.
std::string nfc(std::string_view s);

// Python's str.isspace() for one code point: category Zs or bidi class WS, B or S.
bool is_py_space(char32_t cp);

// Python str.strip()/lstrip()/rstrip(): with chars == nullptr, Unicode whitespace; otherwise
// any code point of *chars.
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars);

// Python str.upper() / str.lower() / str.title() / str.capitalize() (simple case mappings).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

} // namespace ninfer::text
