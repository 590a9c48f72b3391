// Streaming detokenizer: turns generated ids into text as they arrive without ever emitting a
// broken UTF-8 sequence. Bytes of an incomplete character are held until the character
// completes; bytes that can no longer form one become U+FFFD, exactly where
// Tokenizer::decode puts them, so the concatenated output equals decode(all ids).
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace ninfer::text {

class StreamingDetokenizer {
public:
    // `tokenizer` must outlive this object. With skip_special, special tokens produce no text.
    StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special);

    // The complete text that `id` makes available (may be empty while a character is split).
    std::string push(int32_t id);
    // Whatever is still held (an incomplete character at the end becomes U+FFFD).
    std::string finish();

private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    std::string pending_;
};

} // namespace ninfer::text
