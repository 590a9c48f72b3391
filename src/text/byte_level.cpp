#include "text/byte_level.h"

#include <vector>

#include "text/unicode.h"

namespace ninfer::text {
namespace {

struct Tables {
    std::array<char32_t, 256> to_char{};
    std::array<int, 324> to_byte{}; // mapped code points are < 324
    Tables() {
        to_byte.fill(-1);
        // Printable Latin-1 bytes map to themselves; the others, in byte order, to 256 + n.
        const auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const char32_t c = printable(b) ? char32_t(b) : char32_t(256 + n++);
            to_char[size_t(b)] = c;
            to_byte[size_t(c)] = b;
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

} // namespace

char32_t byte_to_char(unsigned char b) {
    return tables().to_char[b];
}

std::optional<unsigned char> char_to_byte(char32_t cp) {
    if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
    return static_cast<unsigned char>(tables().to_byte[cp]);
}

std::string byte_level_decode(std::string_view token) {
    if (valid_utf8_prefix(token) != token.size()) return std::string(token);
    std::string out;
    for (char32_t cp : to_code_points(token)) {
        const auto b = char_to_byte(cp);
        if (!b) return std::string(token);
        out += char(*b);
    }
    return out;
}

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    for (char c : bytes) append_utf8(out, byte_to_char(static_cast<unsigned char>(c)));
    return out;
}

} // namespace ninfer::text
