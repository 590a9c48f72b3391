// Metadata beside the weights of a model directory: generation_config.json (stop ids) and the
// tokenizer files (which ids are real tokens when the embedding is padded).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::io {

// eos_token_id of DIR/generation_config.json (an int or a list); empty when absent.
std::vector<int32_t> read_generation_eos(const std::filesystem::path& dir);

// One past the largest token id that DIR's tokenizer files define (tokenizer.json vocab and
// added_tokens, tokenizer_config.json added_tokens_decoder), capped at vocab_size; vocab_size
// when the directory has no tokenizer.
int64_t read_token_limit(const std::filesystem::path& dir, int64_t vocab_size);

// The id of the token spelled `content` in DIR/tokenizer.json (an added token, else a vocab
// piece); nullopt when the directory has no tokenizer.json or it lacks the token.
std::optional<int32_t> find_token_id(const std::filesystem::path& dir, const std::string& content);

} // namespace ninfer::io
