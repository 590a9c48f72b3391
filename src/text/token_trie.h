// A byte trie over a tokenizer's vocabulary, for token masks of byte-level constraints (the JSON
// constraint walks it with its matcher state and prunes every subtree whose prefix is rejected).
// Built once per tokenizer and cached (TokenTrie::get): immutable, shared between requests and
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "text/tokenizer.h"

namespace ninfer::text {

// UTF-8 validation as a state machine over bytes. States: 0 between code points; 1..7 inside
// a sequence (1: one byte 80..BF left; 2: two left; 3: two left, next A0..BF (after E0);
// 4: two left, next 80..9F (after ED); 5: three left; 6: three left, next 90..BF (after F0);
// 7: three left, next 80..8F (after F4)). Returns kUtf8Invalid for a byte that cannot come next
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
inline constexpr uint8_t kUtf8Invalid = 0xFF;
constexpr uint8_t utf8_step(uint8_t state, uint8_t b) {
    switch (state) {
    case 0:
        if (b < 0x80) return 0;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 3;
        if (b == 0xED) return 4;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 5;
        if (b == 0xF4) return 7;
        return kUtf8Invalid;
    case 1:
        return b >= 0x80 && b <= 0xBF ? 0 : kUtf8Invalid;
    case 2:
        return b >= 0x80 && b <= 0xBF ? 1 : kUtf8Invalid;
    case 3:
        return b >= 0xA0 && b <= 0xBF ? 1 : kUtf8Invalid;
    case 4:
        return b >= 0x80 && b <= 0x9F ? 1 : kUtf8Invalid;
    case 5:
        return b >= 0x80 && b <= 0xBF ? 2 : kUtf8Invalid;
    case 6:
        return b >= 0x90 && b <= 0xBF ? 2 : kUtf8Invalid;
    case 7:
        return b >= 0x80 && b <= 0x8F ? 2 : kUtf8Invalid;
    default:
        return kUtf8Invalid;
    }
}

// Whether byte b continues the body of a JSON string in UTF-8 state s (no quote, backslash or
// control byte between code points): the next state, or kUtf8Invalid.
constexpr uint8_t string_byte(uint8_t s, uint8_t b) {
    if (s == 0 && b < 0x80 && (b < 0x20 || b == '"' || b == '\\')) return kUtf8Invalid;
    return utf8_step(s, b);
}

struct TokenTrie {
    struct Node {
        uint32_t first_child = 0; // children are nodes[first_child, first_child + n_children),
        uint16_t n_children = 0;  // in increasing byte order
        uint8_t byte = 0;         // the byte leading here from the parent
        // Bit s: every token below (after this node's bytes) continues the body of a JSON string
        // entered in UTF-8 state s without a quote, backslash or control byte (json_matcher).
        uint8_t string_safe = 0;
        uint16_t max_chars = 0; // most code points any token below adds after this node
        uint16_t chars = 0;     // code points of this node's prefix (bytes not 10xxxxxx)
        // Tokens: order[tok_begin, tok_own_end) end here, order[tok_begin, tok_end) lie below.
        uint32_t tok_begin = 0, tok_own_end = 0, tok_end = 0;
    };

    std::vector<Node> nodes;     // nodes[0]: the root (empty prefix)
    std::vector<int32_t> order;  // the trie's token ids, by their bytes in lexicographic order
    std::vector<uint16_t> chars; // code points of each token of `order` (as Node::chars)
    int32_t vocab_size = 0;
    // By token id: plain[s][id] = 1 when all the token's bytes continue a JSON string body
    // entered in UTF-8 state s (string_byte); id_chars[id] = its code points.
    std::vector<uint8_t> plain[8];
    std::vector<uint16_t> id_chars;
    Tokenizer tokenizer; // the source (keeps the cache key alive)

    // The trie of every non-added token with non-empty bytes (added tokens, special or not,
    // are left out: constraints allow them only by id).
    static std::shared_ptr<const TokenTrie> build(const Tokenizer& tok);
    // build() cached per tokenizer (the last few tokenizers used); thread-safe.
    static std::shared_ptr<const TokenTrie> get(const Tokenizer& tok);
};

} // namespace ninfer::text
