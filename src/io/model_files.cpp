#include "io/model_files.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ninfer::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Parses a JSON file, or returns a discarded value when it is absent.
json read_json(const fs::path& file) {
    if (!fs::exists(file)) return json(json::value_t::discarded);
    std::ifstream in(file);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) fail(ErrorCategory::Io, file.string(), ": not valid JSON");
    return j;
}

} // namespace

std::vector<int32_t> read_generation_eos(const fs::path& dir) {
    json j = read_json(dir / "generation_config.json");
    std::vector<int32_t> ids;
    if (j.is_discarded() || !j.is_object() || !j.contains("eos_token_id")) return ids;
    const json& e = j["eos_token_id"];
    // Ids outside [0, 2^31) name no token: an error, never a wrapped id that stops early.
    auto id = [&](const json& v) {
        if (v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX ||
            (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT32_MAX)))
            fail_invalid((dir / "generation_config.json").string(), ": eos_token_id ", v.dump(),
                         " is not a token id");
        return v.get<int32_t>();
    };
    if (e.is_number_integer())
        ids.push_back(id(e));
    else if (e.is_array())
        for (const json& v : e)
            if (v.is_number_integer()) ids.push_back(id(v));
    return ids;
}

int64_t read_token_limit(const fs::path& dir, int64_t vocab_size) {
    int64_t max_id = -1;
    json tok = read_json(dir / "tokenizer.json");
    if (!tok.is_discarded() && tok.is_object()) {
        if (tok.contains("model") && tok["model"].contains("vocab") &&
            tok["model"]["vocab"].is_object())
            for (const auto& [piece, id] : tok["model"]["vocab"].items())
                if (id.is_number_integer()) max_id = std::max(max_id, id.get<int64_t>());
        if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
            for (const json& t : tok["added_tokens"])
                if (t.contains("id") && t["id"].is_number_integer())
                    max_id = std::max(max_id, t["id"].get<int64_t>());
    }
    json cfg = read_json(dir / "tokenizer_config.json");
    if (!cfg.is_discarded() && cfg.is_object() && cfg.contains("added_tokens_decoder") &&
        cfg["added_tokens_decoder"].is_object())
        for (const auto& [key, value] : cfg["added_tokens_decoder"].items()) {
            if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos ||
                key.size() > 12)
                continue;
            max_id = std::max<int64_t>(max_id, std::stoll(key));
        }
    if (max_id < 0) return vocab_size;
    return std::min(vocab_size, max_id + 1);
}

std::optional<int32_t> find_token_id(const fs::path& dir, const std::string& content) {
    json tok = read_json(dir / "tokenizer.json");
    if (tok.is_discarded() || !tok.is_object()) return std::nullopt;
    auto as_id = [](const json& v) -> std::optional<int32_t> {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
            return std::nullopt;
        return v.get<int32_t>();
    };
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
        for (const json& t : tok["added_tokens"])
            if (t.is_object() && t.value("content", json()) == content && t.contains("id"))
                return as_id(t["id"]);
    if (tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
        tok["model"]["vocab"].is_object() && tok["model"]["vocab"].contains(content))
        return as_id(tok["model"]["vocab"][content]);
    return std::nullopt;
}

} // namespace ninfer::io
