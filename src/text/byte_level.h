// GPT-2 byte-level mapping: each byte is shown as one printable code point (bytes_to_unicode).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace ninfer::text {

// The code point that represents byte b.
char32_t byte_to_char(unsigned char b);

// The byte a code point represents, if it is one of the 256 mapped code points.
std::optional<unsigned char> char_to_byte(char32_t cp);

// HF ByteLevel decoding of one token string: the bytes its code points represent when every
// code point is mapped, otherwise the token's own UTF-8 bytes.
std::string byte_level_decode(std::string_view token);

// ByteLevel encoding of raw bytes into the code-point string used as a vocabulary key.
std::string byte_level_encode(std::string_view bytes);

} // namespace ninfer::text
