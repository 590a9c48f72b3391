// config.json of a DFlash / DFlash2 drafter (model/dflash.h).
#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "io/config_reader.h"
#include "model/dflash.h"

namespace ninfer::model {
namespace {

constexpr int64_t kMaxWidth = int64_t(1) << 20; // bounds every shape field (see io::Reader)

bool is_v2(const nlohmann::json& j, const nlohmann::json& d) {
    if (j.contains("architectures") && j["architectures"].is_array())
        for (const auto& a : j["architectures"])
            if (a.is_string() && a.get<std::string>().find("DFlash2") != std::string::npos)
                return true;
    return d.contains("selector_rank");
}

// Qwen3Config's layer types: as given, else sliding from max_window_layers on when the window
// is in use (use_sliding_window), else full attention.
void read_layers(const nlohmann::json& j, const io::Reader& r, DFlashConfig& c,
                 const std::string& source) {
    const bool use_window = j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean()
                                ? j["use_sliding_window"].get<bool>()
                                : false;
    const int64_t window = r.integer("sliding_window", 0, 0, kMaxWidth);
    const bool has_types = j.contains("layer_types") && j["layer_types"].is_array();
    c.sliding.assign(size_t(c.num_layers), false);
    if (has_types) {
        if (int64_t(j["layer_types"].size()) != c.num_layers)
            fail_invalid(source, ": layer_types has ", j["layer_types"].size(),
                         " entries for num_hidden_layers ", c.num_layers);
        for (size_t i = 0; i < c.sliding.size(); ++i) {
            const auto& t = j["layer_types"][i];
            const std::string name = t.is_string() ? t.get<std::string>() : "";
            if (name != "sliding_attention" && name != "full_attention")
                fail(ErrorCategory::Unsupported, source, ": layer_types[", i, "] '", t.dump(),
                     "' (expected sliding_attention or full_attention)");
            c.sliding[i] = name == "sliding_attention";
        }
    } else if (use_window && window > 0) {
        const int64_t from = r.integer("max_window_layers", c.num_layers, 0, kMaxWidth);
        for (int64_t i = from; i < c.num_layers; ++i) c.sliding[size_t(i)] = true;
    }
    // Qwen3Config keeps the window only with use_sliding_window; z-lab's configs set both.
    c.sliding_window = (use_window || !j.contains("use_sliding_window")) ? window : 0;
    const bool any_sliding = std::count(c.sliding.begin(), c.sliding.end(), true) > 0;
    if (any_sliding && c.sliding_window <= 0)
        fail_invalid(source, ": sliding_attention layers need a positive sliding_window");
    // z-lab's rule: is_causal when given, else sliding layers are causal.
    c.causal.assign(size_t(c.num_layers), false);
    const bool has_causal = j.contains("is_causal") && !j["is_causal"].is_null();
    if (has_causal && !j["is_causal"].is_boolean())
        fail_invalid(source, ": is_causal must be a boolean");
    for (size_t i = 0; i < c.causal.size(); ++i)
        c.causal[i] = has_causal ? j["is_causal"].get<bool>() : bool(c.sliding[i]);
}

double read_rope_theta(const nlohmann::json& j, const std::string& source) {
    const nlohmann::json* rp = nullptr;
    for (const char* key : {"rope_parameters", "rope_scaling"})
        if (j.contains(key) && j[key].is_object()) rp = &j[key];
    if (rp) {
        const std::string type =
            rp->contains("rope_type") && (*rp)["rope_type"].is_string()
                ? (*rp)["rope_type"].get<std::string>()
                : "default";
        if (type != "default")
            fail(ErrorCategory::Unsupported, source, ": rope_type '", type,
                 "' (DFlash drafters use default RoPE)");
        if (rp->contains("rope_theta"))
            return io::Reader{*rp, source}.positive_number("rope_theta", 1e6);
    }
    return io::Reader{j, source}.positive_number("rope_theta", 1e6);
}

} // namespace

DFlashConfig parse_dflash_config(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) fail_invalid(source, ": config.json is not a JSON object");
    if (!j.contains("dflash_config") || !j["dflash_config"].is_object())
        fail_invalid(source, ": not a DFlash drafter (no dflash_config object)");
    const nlohmann::json& d = j["dflash_config"];
    const io::Reader r{j, source};
    const io::Reader rd{d, source};
    DFlashConfig c;
    c.v2 = is_v2(j, d);
    c.hidden_size = r.integer("hidden_size", 0, 1, kMaxWidth);
    c.intermediate_size = r.integer("intermediate_size", 0, 1, kMaxWidth);
    c.num_layers = r.integer("num_hidden_layers", 0, 1, 64);
    c.num_heads = r.integer("num_attention_heads", 0, 1, 1024);
    c.num_kv_heads = r.integer("num_key_value_heads", c.num_heads, 1, 1024);
    c.head_dim = r.integer("head_dim", c.hidden_size / c.num_heads, 1, 256);
    c.vocab_size = r.integer("vocab_size", 0, 1, int64_t(1) << 24);
    c.rms_norm_eps = r.positive_number("rms_norm_eps", 1e-6);
    c.rope_theta = read_rope_theta(j, source);
    if (c.num_heads % c.num_kv_heads != 0)
        fail_invalid(source, ": num_attention_heads ", c.num_heads,
                     " is not a multiple of num_key_value_heads ", c.num_kv_heads);
    if (c.head_dim % 2 != 0) fail_invalid(source, ": head_dim must be even");
    if (j.contains("attention_bias") && j["attention_bias"].is_boolean() &&
        j["attention_bias"].get<bool>())
        fail(ErrorCategory::Unsupported, source, ": attention_bias (DFlash drafters have none)");
    if (j.contains("hidden_act") && j["hidden_act"] != "silu")
        fail(ErrorCategory::Unsupported, source, ": hidden_act ", j["hidden_act"].dump(),
             " (expected silu)");
    read_layers(j, r, c, source);
    // z-lab's DFlashDraftModel: the taps in dflash_config.target_layer_ids, or derived from the
    // target's depth (resolve_dflash_target); num_target_layers and block_size at the top level
    // (a block_size in dflash_config wins).
    c.num_target_layers = r.integer("num_target_layers", 0, 0, 1024);
    if (d.contains("target_layer_ids") && !d["target_layer_ids"].is_null()) {
        if (!d["target_layer_ids"].is_array() || d["target_layer_ids"].empty())
            fail_invalid(source, ": dflash_config.target_layer_ids must be a non-empty array");
        for (const auto& t : d["target_layer_ids"]) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 1024)
                fail_invalid(source, ": dflash_config.target_layer_ids holds ", t.dump());
            c.target_layers.push_back(int32_t(t.get<int64_t>()));
        }
    }
    // The mask token: by id, else by its text in the target's tokenizer (resolve_dflash_target;
    // SGLang's default text when neither is given).
    if (d.contains("mask_token_id") && !d["mask_token_id"].is_null()) {
        c.mask_token_id = int32_t(rd.integer("mask_token_id", 0, 0, int64_t(1) << 24));
    } else {
        c.mask_token_id = -1;
        if (d.contains("mask_token") && !d["mask_token"].is_null()) {
            if (!d["mask_token"].is_string() || d["mask_token"].get<std::string>().empty())
                fail_invalid(source, ": dflash_config.mask_token must be a non-empty string");
            c.mask_token = d["mask_token"].get<std::string>();
        }
    }
    c.block_size = d.contains("block_size") ? rd.integer("block_size", 16, 2, 16)
                                            : r.integer("block_size", 16, 2, 16);
    c.output_multiplier = rd.number("output_multiplier", 1.0);
    c.logit_softcap = d.contains("final_logit_softcapping") && !d["final_logit_softcapping"].is_null()
                          ? rd.number("final_logit_softcapping", 0.0)
                          : 0.0;
    if (!(c.output_multiplier > 0) || c.logit_softcap < 0)
        fail_invalid(source, ": output_multiplier must be positive, final_logit_softcapping >= 0");
    const double embed_scale = rd.number("input_embedding_scale", 1.0);
    if (embed_scale != 1.0)
        fail(ErrorCategory::Unsupported, source, ": dflash_config.input_embedding_scale ",
             embed_scale, " (only 1 is supported)");
    if (c.v2) {
        c.conv_taps = rd.integer("conv_kernel_size", 0, 1, 8);
        c.conv_group = rd.integer("conv_group_size", 0, 1, kMaxWidth);
        c.selector_rank = rd.integer("selector_rank", 0, 1, 4096);
        c.selector_top_k = rd.integer("selector_top_k", 0, 1, 64);
        if (c.hidden_size % c.conv_group != 0)
            fail_invalid(source, ": conv_group_size ", c.conv_group,
                         " does not divide hidden_size ", c.hidden_size);
    }
    return c;
}

DFlashConfig load_dflash_config(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) fail(ErrorCategory::Io, "draft model: cannot read ", path.string());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        fail_invalid(path.string(), ": not valid JSON (", e.what(), ")");
    }
    return parse_dflash_config(j, path.string());
}

std::vector<int32_t> default_target_layers(int64_t target_layers, int64_t draft_layers) {
    if (draft_layers <= 1) return {int32_t(target_layers / 2)};
    const double start = 1, span = double(target_layers - 3) - start;
    std::vector<int32_t> taps;
    for (int64_t i = 0; i < draft_layers; ++i) // Python's round(): halves to even (nearbyint)
        taps.push_back(int32_t(std::nearbyint(start + double(i) * span / double(draft_layers - 1))));
    return taps;
}

void resolve_dflash_target(DFlashConfig& d, const io::ModelConfig& t, const std::string& source,
                           const TokenLookup& find_token) {
    if (d.mask_token_id < 0) {
        const std::optional<int32_t> id = find_token ? find_token(d.mask_token) : std::nullopt;
        if (!id)
            fail_invalid(source, ": dflash_config.mask_token_id is missing and the target's "
                         "tokenizer has no token \"", d.mask_token,
                         "\" (dflash_config.mask_token) to take it from");
        d.mask_token_id = *id;
    }
    if (d.num_target_layers > 0 && d.num_target_layers != t.num_layers)
        fail_invalid(source, ": num_target_layers ", d.num_target_layers,
                     " does not match the target's ", t.num_layers, " layers");
    if (d.target_layers.empty()) d.target_layers = default_target_layers(t.num_layers, d.num_layers);
    if (d.hidden_size != t.hidden_size)
        fail_invalid(source, ": drafter hidden_size ", d.hidden_size,
                     " does not match the target's ", t.hidden_size);
    if (d.vocab_size != t.vocab_size)
        fail_invalid(source, ": drafter vocab_size ", d.vocab_size,
                     " does not match the target's ", t.vocab_size);
    for (int32_t l : d.target_layers)
        if (l < 0 || l >= t.num_layers - 1)
            fail_invalid(source, ": target layer ", l, " of dflash_config.target_layer_ids is not "
                         "an inner layer of the target (", t.num_layers, " layers)");
    if (d.mask_token_id >= t.vocab_size)
        fail_invalid(source, ": mask_token_id ", d.mask_token_id, " is outside the target's ",
                     t.vocab_size, "-token vocabulary");
}

} // namespace ninfer::model
