// Internal state of Tokenizer (shared by tokenizer.cpp and tokenizer_load.cpp).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/regex_split.h"
#include "text/tokenizer.h"

namespace ninfer::text {

struct Tokenizer::Impl {
    bool nfc = false;                                   // normalizer NFC
    std::vector<std::unique_ptr<RegexSplitter>> splits; // applied in order (Isolated)
    bool add_prefix_space = false;                      // ByteLevel pre-tokenizer option
    std::unique_ptr<BpeModel> bpe;
    std::vector<AddedToken> added;     // sorted by id
    std::vector<std::string> id_bytes; // id -> decoded bytes ("" for holes)
    std::vector<uint8_t> id_kind;      // 0 hole, 1 vocab, 2 added, 3 special added
    std::unordered_map<std::string, int32_t> added_by_content;
    std::array<std::vector<int>, 256> added_by_first_byte; // indices into added, longest first

    void index_added();
    void encode_text(std::string_view text, std::vector<int32_t>& out) const;
};

} // namespace ninfer::text
