// Loading a Tokenizer from tokenizer.json (+ tokenizer_config.json).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace ninfer::text {
namespace {

using nlohmann::json;

// Real vocabularies have under a million entries; larger ids are malformed files.
constexpr int32_t kMaxTokenId = 1 << 24;

// GPT-2's pattern, used by ByteLevel with use_regex = true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string read_text(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(ErrorCategory::Io, "cannot read ", file.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void load_normalizer(const json& n, Tokenizer::Impl& m, const std::string& src) {
    if (n.is_null()) return;
    const std::string type = n.value("type", "");
    if (type == "NFC") {
        m.nfc = true;
    } else if (type == "Sequence") {
        for (const auto& x : n.at("normalizers")) load_normalizer(x, m, src);
    } else {
        fail(ErrorCategory::Unsupported, src, ": normalizer '", type, "' is not supported");
    }
}

void load_pre_tokenizer(const json& p, Tokenizer::Impl& m, const std::string& src) {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
        for (const auto& x : p.at("pretokenizers")) load_pre_tokenizer(x, m, src);
    } else if (type == "Split") {
        const json& pat = p.at("pattern");
        require(pat.contains("Regex"), src, ": Split pre-tokenizer needs a Regex pattern");
        if (p.value("behavior", "") != "Isolated" || p.value("invert", false))
            fail(ErrorCategory::Unsupported, src, ": Split behaviour must be Isolated");
        m.splits.push_back(std::make_unique<RegexSplitter>(pat.at("Regex").get<std::string>()));
    } else if (type == "ByteLevel") {
        m.add_prefix_space = p.value("add_prefix_space", false);
        if (p.value("use_regex", true))
            m.splits.push_back(std::make_unique<RegexSplitter>(kGpt2Pattern));
    } else {
        fail(ErrorCategory::Unsupported, src, ": pre-tokenizer '", type, "' is not supported");
    }
}

std::pair<std::string, std::string> parse_merge(const json& j, const std::string& src) {
    if (j.is_array() && j.size() == 2) return {j[0].get<std::string>(), j[1].get<std::string>()};
    const std::string s = j.get<std::string>();
    const size_t sp = s.find(' ', 1);
    require(sp != std::string::npos, src, ": malformed merge '", s, "'");
    return {s.substr(0, sp), s.substr(sp + 1)};
}

// A token id from JSON: an integer in [0, kMaxTokenId). A float (1e117 parses as one) or an
// out-of-range integer is an error, never a conversion (float -> int out of range is undefined).
int32_t json_token_id(const json& v, const std::string& src) {
    if (!v.is_number_integer()) fail_invalid(src, ": token id ", v.dump(), " is not an integer");
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() < uint64_t(kMaxTokenId)
                              : v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxTokenId;
    require(in_range, src, ": token id ", v.dump(), " out of range");
    return int32_t(v.get<int64_t>());
}

void load_model(const json& model, Tokenizer::Impl& m, const std::string& src) {
    if (model.value("type", "BPE") != "BPE")
        fail(ErrorCategory::Unsupported, src, ": model type must be BPE");
    if (model.value("byte_fallback", false))
        fail(ErrorCategory::Unsupported, src, ": byte_fallback BPE is not supported");
    std::unordered_map<std::string, int32_t> vocab;
    int32_t max_id = -1;
    for (const auto& [key, value] : model.at("vocab").items()) {
        const int32_t id = json_token_id(value, src);
        max_id = std::max(max_id, id);
        std::string bytes = byte_level_decode(key);
        m.id_bytes.resize(std::max(m.id_bytes.size(), size_t(id) + 1));
        m.id_kind.resize(m.id_bytes.size(), 0);
        m.id_bytes[size_t(id)] = bytes;
        m.id_kind[size_t(id)] = 1;
        if (byte_level_encode(bytes) == key) vocab.emplace(std::move(bytes), id);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& j : model.at("merges")) {
        auto [a, b] = parse_merge(j, src);
        merges.emplace_back(byte_level_decode(a), byte_level_decode(b));
    }
    m.bpe =
        std::make_unique<BpeModel>(std::move(vocab), merges, model.value("ignore_merges", false));
}

void add_token(Tokenizer::Impl& m, AddedToken t) {
    require(t.id >= 0 && t.id < kMaxTokenId, "added token id ", t.id, " out of range");
    for (const auto& a : m.added)
        if (a.id == t.id) return; // tokenizer.json wins over tokenizer_config.json
    require(!t.content.empty(), "added token ", t.id, " is empty");
    require_utf8(t.content, "added token");
    m.id_bytes.resize(std::max(m.id_bytes.size(), size_t(t.id) + 1));
    m.id_kind.resize(m.id_bytes.size(), 0);
    m.id_bytes[size_t(t.id)] = byte_level_decode(t.content);
    m.id_kind[size_t(t.id)] = t.special ? 3 : 2;
    m.added.push_back(std::move(t));
}

AddedToken parse_added(const json& j, int32_t id) {
    AddedToken t;
    t.id = id;
    t.content = j.at("content").get<std::string>();
    t.special = j.value("special", false);
    t.lstrip = j.value("lstrip", false);
    t.rstrip = j.value("rstrip", false);
    return t;
}

} // namespace

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json, const std::string& config_json,
                               const std::string& source) {
    auto m = std::make_shared<Impl>();
    try {
        const json j = json::parse(tokenizer_json);
        load_model(j.at("model"), *m, source);
        load_normalizer(j.value("normalizer", json()), *m, source);
        load_pre_tokenizer(j.value("pre_tokenizer", json()), *m, source);
        if (j.contains("added_tokens"))
            for (const auto& a : j.at("added_tokens"))
                add_token(*m, parse_added(a, json_token_id(a.at("id"), source)));
        if (!config_json.empty()) {
            const json c = json::parse(config_json);
            if (c.contains("added_tokens_decoder"))
                for (const auto& [id, a] : c.at("added_tokens_decoder").items())
                    add_token(
                        *m, parse_added(a, json_token_id(json::parse(id, nullptr, false), source)));
        }
    } catch (const json::exception& e) {
        fail_invalid(source, ": ", e.what());
    } catch (const std::invalid_argument& e) {
        fail_invalid(source, ": bad token id in added_tokens_decoder");
    } catch (const std::out_of_range& e) {
        fail_invalid(source, ": bad token id in added_tokens_decoder");
    }
    require(m->bpe != nullptr, source, ": no model");
    m->index_added();
    Tokenizer t;
    t.impl_ = std::move(m);
    return t;
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& file) {
    const std::filesystem::path config = file.parent_path() / "tokenizer_config.json";
    const std::string config_text = std::filesystem::exists(config) ? read_text(config) : "";
    return from_json(read_text(file), config_text, file.string());
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
    const std::filesystem::path file = dir / "tokenizer.json";
    if (!std::filesystem::exists(file))
        fail(ErrorCategory::Io, dir.string(), ": no tokenizer.json in the model directory");
    return from_file(file);
}

} // namespace ninfer::text
