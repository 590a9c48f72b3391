// Byte-level BPE tokenizer loaded from an HF tokenizer.json (Qwen2/3/3.5/3.6 and any other
// byte-level BPE): NFC normaliser, Split(regex, Isolated) + ByteLevel pre-tokenizers, BPE merges
// by rank, added tokens matched before everything else (leftmost longest), ByteLevel decoder.
// Encode and decode produce the same ids and text as HF `tokenizers` (tests/text prove it on a
// large corpus). Instances are immutable after loading and safe to share between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::text {

struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool special = false; // skipped by decode(skip_special = true)
    bool lstrip = false;  // the match also takes the whitespace before it
    bool rstrip = false;  // ... and after it
};

class Tokenizer {
public:
    // Parses tokenizer.json text; `config_json` (tokenizer_config.json text, may be empty) adds
    // the tokens of its added_tokens_decoder that tokenizer.json lacks. Unsupported models,
    // normalisers or pre-tokenizers raise ninfer::Error (Unsupported); malformed JSON or a bad
    // regex raises InvalidArgument. `source` names the file in messages.
    static Tokenizer from_json(const std::string& tokenizer_json, const std::string& config_json,
                               const std::string& source = "tokenizer.json");
    // Reads `file` (a tokenizer.json) and, when present beside it, tokenizer_config.json.
    static Tokenizer from_file(const std::filesystem::path& file);
    // DIR/tokenizer.json (+ DIR/tokenizer_config.json); Io error when missing.
    static Tokenizer from_model_dir(const std::filesystem::path& dir);

    // Token ids of valid UTF-8 `text` (invalid UTF-8: InvalidArgument naming the byte offset).
    // With parse_special false, special added tokens are not matched (their text is encoded as
    // ordinary text); non-special added tokens (e.g. <think>) are always matched, as in HF.
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;

    // Text of `ids`; invalid UTF-8 from partial byte tokens becomes U+FFFD (as HF decode).
    // Unknown ids raise InvalidArgument.
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

    // Raw bytes of one token (what decode concatenates before UTF-8 repair).
    const std::string& token_bytes(int32_t id) const;
    bool is_special(int32_t id) const;
    bool is_added(int32_t id) const;
    // The id of an added token's content, or of a vocabulary entry given as raw text.
    std::optional<int32_t> token_id(std::string_view text) const;
    // One past the largest id.
    int32_t vocab_size() const;
    const std::vector<AddedToken>& added_tokens() const;

    struct Impl;

private:
    std::shared_ptr<const Impl> impl_;
};

} // namespace ninfer::text
