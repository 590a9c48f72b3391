#include "io/hf_config.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_reader.h"
#include "io/rope_scaling.h"

namespace ninfer::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The largest value each field may take: a few times what the largest real model has (the
// Qwen3.5/3.6 releases' figure in the comment), so that no product of them below overflows
// int64: experts x 3 x expert_intermediate x hidden x layers < 2^59, and KV bytes per token
// x positions < 2^56.
constexpr int64_t kMaxVocab = int64_t(1) << 22;        // 248,320
constexpr int64_t kMaxHidden = int64_t(1) << 16;       // 5,120
constexpr int64_t kMaxLayers = 1024;                   // 64
constexpr int64_t kMaxHeads = 1024;                    // 64 (value heads of GDN: 48)
constexpr int64_t kMaxHeadDim = 1024;                  // 256
constexpr int64_t kMaxIntermediate = int64_t(1) << 20; // 17,408
constexpr int64_t kMaxExperts = 4096;                  // 256 (8 per token)
constexpr int64_t kMaxConvKernel = 64;                 // 4
constexpr int64_t kMaxMtpLayers = 16;                  // 1
constexpr int64_t kMaxPositions = int64_t(1) << 24;    // 262,144
constexpr int64_t kMaxFp8Block = 4096;                 // 128 x 128; also bounds group sizes

std::vector<LayerKind> parse_layer_types(const json& text, int64_t num_layers, const Reader& r) {
    std::vector<LayerKind> kinds;
    if (text.contains("layer_types") && !text["layer_types"].is_null()) {
        const json& lt = text["layer_types"];
        if (!lt.is_array()) r.bad("layer_types", "must be a list");
        for (const json& t : lt) {
            std::string s = t.is_string() ? t.get<std::string>() : "";
            if (s == "linear_attention")
                kinds.push_back(LayerKind::LinearAttention);
            else if (s == "full_attention")
                kinds.push_back(LayerKind::FullAttention);
            else
                r.bad("layer_types", concat("has unknown layer type '", t.dump(), "'"));
        }
        if (int64_t(kinds.size()) != num_layers)
            r.bad("layer_types",
                  concat("has ", kinds.size(), " entries for ", num_layers, " layers"));
        return kinds;
    }
    int64_t interval = r.integer("full_attention_interval", 4, 1, kMaxLayers);
    for (int64_t i = 0; i < num_layers; ++i)
        kinds.push_back((i + 1) % interval ? LayerKind::LinearAttention : LayerKind::FullAttention);
    return kinds;
}

void parse_rope(const json& text, ModelConfig& c, const Reader& r) {
    // As HF: a non-empty legacy rope_scaling dict replaces rope_parameters; the top-level
    // rope_theta and partial_rotary_factor fill in what the dict lacks.
    c.rope_theta = r.positive_number("rope_theta", 10000.0);
    c.partial_rotary_factor = r.number("partial_rotary_factor", 0.25);
    if (const json* rope = rope_dict(text)) {
        const json& rp = *rope;
        Reader rr{rp, r.source};
        c.rope_theta = rr.positive_number("rope_theta", c.rope_theta);
        // HF reads the factor inside rope_parameters; the top-level copy is a legacy duplicate.
        c.partial_rotary_factor = rr.number("partial_rotary_factor", c.partial_rotary_factor);
        if (rp.contains("mrope_section") && !rp["mrope_section"].is_null()) {
            const json& ms = rp["mrope_section"];
            if (!ms.is_array() || ms.size() != 3)
                r.bad("mrope_section", "must be a list of 3 integers");
            for (int i = 0; i < 3; ++i) {
                if (!ms[size_t(i)].is_number_integer() || ms[size_t(i)].get<int64_t>() < 0 ||
                    ms[size_t(i)].get<int64_t>() > kMaxHeadDim)
                    r.bad("mrope_section",
                          concat("must be a list of 3 integers in [0, ", kMaxHeadDim, "]"));
                c.mrope_section[i] = ms[size_t(i)].get<int64_t>();
            }
        }
    }
    if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
        r.bad("partial_rotary_factor", "must be in (0, 1]");
    c.rotary_dim = int64_t(double(c.head_dim) * c.partial_rotary_factor);
    if (c.rotary_dim < 2 || c.rotary_dim % 2)
        r.bad("partial_rotary_factor",
              concat("gives rotary dim ", c.rotary_dim, ", which must be even and >= 2"));
}

void parse_eos(const json& top, const json& text, ModelConfig& c, const std::string& source) {
    for (const json* src : {&text, &top}) {
        if (!src->contains("eos_token_id")) continue;
        const json& e = (*src)["eos_token_id"];
        // A token id outside [0, 2^31) can name no token: refused rather than wrapped.
        auto id = [&](const json& v) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX ||
                (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT32_MAX)))
                fail_invalid(source, ": eos_token_id ", v.dump(), " is not a token id");
            return v.get<int32_t>();
        };
        if (e.is_number_integer())
            c.eos_token_ids = {id(e)};
        else if (e.is_array())
            for (const json& v : e) c.eos_token_ids.push_back(id(v));
        if (!c.eos_token_ids.empty()) return;
    }
}

void validate(const ModelConfig& c, const Reader& r) {
    if (c.num_heads % c.num_kv_heads)
        r.bad("num_key_value_heads",
              concat(c.num_kv_heads, " does not divide ", c.num_heads, " attention heads"));
    if (c.linear_num_value_heads % c.linear_num_key_heads)
        r.bad("linear_num_value_heads",
              concat(c.linear_num_value_heads, " is not a multiple of linear_num_key_heads ",
                     c.linear_num_key_heads));
    if (c.moe && c.num_experts_per_tok > c.num_experts)
        r.bad("num_experts_per_tok", "exceeds num_experts");
}

} // namespace

namespace {
ModelConfig parse_hf_config_fields(const json& top, const std::string& source);
} // namespace

int64_t ModelConfig::count_layers(LayerKind kind) const {
    int64_t n = 0;
    for (LayerKind k : layer_types) n += k == kind;
    return n;
}

ModelConfig parse_hf_config(const json& top, const std::string& source) {
    try {
        return parse_hf_config_fields(top, source);
    } catch (const json::exception& e) { // a field of the wrong JSON type
        fail_invalid(source, ": ", e.what());
    }
}

namespace {

// quantization_config ninfer_groupwise: bits 8 or 4, group_size >= 1.
void parse_groupwise(const json& q, ModelConfig& c, const std::string& source) {
    const json bits = q.value("bits", json());
    const json group = q.value("group_size", json());
    if (!bits.is_number_integer() || (bits.get<int64_t>() != 8 && bits.get<int64_t>() != 4))
        fail_invalid(source, ": ninfer_groupwise quantization_config needs bits 8 or 4");
    if (!group.is_number_integer() || group.get<int64_t>() < 1 ||
        group.get<int64_t>() > kMaxFp8Block)
        fail_invalid(source, ": ninfer_groupwise quantization_config needs a group_size in [1, ",
                     kMaxFp8Block, "]");
    c.group_bits = int(bits.get<int64_t>());
    c.group_size = group.get<int64_t>();
}

// quantization_config (top level, or in text_config): fp8 with its weight_block_size, or
// ninfer_groupwise with its bits and group size.
void parse_quantization(const json& holder, ModelConfig& c, const std::string& source) {
    if (!holder.contains("quantization_config") || holder["quantization_config"].is_null()) return;
    const json& q = holder["quantization_config"];
    if (!q.is_object()) fail_invalid(source, ": quantization_config must be an object");
    const std::string method = q.value("quant_method", std::string());
    if (method == "ninfer_groupwise") return parse_groupwise(q, c, source);
    if (method != "fp8")
        fail(ErrorCategory::Unsupported, source, ": quantization_config quant_method '", method,
             "' is not supported (fp8 is: the official Qwen FP8 checkpoints; ninfer_groupwise: "
             "ninfer convert --to w8|q4)");
    const std::string fmt = q.value("fmt", std::string("e4m3"));
    if (fmt != "e4m3")
        fail(ErrorCategory::Unsupported, source, ": fp8 fmt '", fmt, "' (only e4m3 is)");
    c.fp8 = true;
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
        const json& b = q["weight_block_size"];
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() ||
            !b[1].is_number_integer() || b[0].get<int64_t>() < 1 || b[1].get<int64_t>() < 1 ||
            b[0].get<int64_t>() > kMaxFp8Block || b[1].get<int64_t>() > kMaxFp8Block)
            fail_invalid(source, ": quantization_config weight_block_size must be two integers "
                                 "in [1, ", kMaxFp8Block, "]");
        c.fp8_block[0] = b[0].get<int64_t>();
        c.fp8_block[1] = b[1].get<int64_t>();
    }
}

ModelConfig parse_hf_config_fields(const json& top, const std::string& source) {
    if (!top.is_object()) fail_invalid(source, ": config is not a JSON object");
    ModelConfig c;
    c.model_type = top.value("model_type", std::string());
    const json* text = &top;
    if (c.model_type == "qwen3_5" || c.model_type == "qwen3_5_moe") {
        if (!top.contains("text_config") || !top["text_config"].is_object())
            fail_invalid(source, ": model_type ", c.model_type, " needs a text_config object");
        text = &top["text_config"];
        c.nested = true;
        c.has_vision = top.contains("vision_config") && top["vision_config"].is_object();
        c.text_model_type = c.model_type + "_text";
    } else if (c.model_type == "qwen3_5_text" || c.model_type == "qwen3_5_moe_text") {
        c.text_model_type = c.model_type;
    } else {
        fail(ErrorCategory::Unsupported, source, ": model_type '", c.model_type,
             "' is not supported (qwen3_5, qwen3_5_moe, qwen3_5_text, qwen3_5_moe_text)");
    }
    c.moe = c.text_model_type == "qwen3_5_moe_text";
    Reader r{*text, source};
    std::string act = text->value("hidden_act", std::string("silu"));
    if (act != "silu") fail(ErrorCategory::Unsupported, source, ": hidden_act '", act, "'");
    if (r.boolean("attention_bias", false))
        fail(ErrorCategory::Unsupported, source, ": attention_bias true");

    c.vocab_size = r.integer("vocab_size", 248320, 1, kMaxVocab);
    c.hidden_size = r.integer("hidden_size", c.moe ? 2048 : 4096, 1, kMaxHidden);
    c.num_layers = r.integer("num_hidden_layers", c.moe ? 40 : 32, 1, kMaxLayers);
    c.layer_types = parse_layer_types(*text, c.num_layers, r);
    c.num_heads = r.integer("num_attention_heads", 16, 1, kMaxHeads);
    c.num_kv_heads = r.integer("num_key_value_heads", c.moe ? 2 : 4, 1, kMaxHeads);
    c.head_dim = r.integer("head_dim", 256, 1, kMaxHeadDim);
    parse_rope(*text, c, r);
    c.linear_num_key_heads = r.integer("linear_num_key_heads", 16, 1, kMaxHeads);
    c.linear_num_value_heads = r.integer("linear_num_value_heads", 32, 1, kMaxHeads);
    c.linear_key_head_dim = r.integer("linear_key_head_dim", 128, 1, kMaxHeadDim);
    c.linear_value_head_dim = r.integer("linear_value_head_dim", 128, 1, kMaxHeadDim);
    c.linear_conv_kernel = r.integer("linear_conv_kernel_dim", 4, 2, kMaxConvKernel);
    if (c.moe) {
        c.moe_intermediate_size = r.integer("moe_intermediate_size", 512, 1, kMaxIntermediate);
        c.shared_expert_intermediate_size = r.integer("shared_expert_intermediate_size", 512, 1, kMaxIntermediate);
        c.num_experts = r.integer("num_experts", 256, 1, kMaxExperts);
        c.num_experts_per_tok = r.integer("num_experts_per_tok", 8, 1, kMaxExperts);
    } else {
        c.intermediate_size = r.integer("intermediate_size", 12288, 1, kMaxIntermediate);
    }
    c.rms_norm_eps = r.positive_number("rms_norm_eps", 1e-6);
    // In the nested layout the top-level flag governs the head (HF ties through the top config).
    Reader top_reader{top, source};
    c.tie_word_embeddings = c.nested ? top_reader.boolean("tie_word_embeddings",
                                                          r.boolean("tie_word_embeddings", false))
                                     : r.boolean("tie_word_embeddings", false);
    c.mtp_num_hidden_layers = r.integer("mtp_num_hidden_layers", 0, 0, kMaxMtpLayers);
    c.max_position_embeddings = r.integer("max_position_embeddings", 32768, 1, kMaxPositions);
    parse_rope_scaling(rope_dict(*text), c, r); // after the theta, rotary dim and positions
    c.dtype = top.value("dtype", top.value("torch_dtype", std::string()));
    parse_quantization(top.contains("quantization_config") ? top : *text, c, source);
    parse_eos(top, *text, c, source);
    if (c.has_vision) parse_vision_config(top, c, source);
    validate(c, r);
    return c;
}

} // namespace

ModelConfig load_hf_config(const fs::path& path) {
    fs::path file = fs::is_directory(path) ? path / "config.json" : path;
    std::ifstream in(file);
    if (!in) fail(ErrorCategory::Io, file.string(), ": cannot open");
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) fail_invalid(file.string(), ": not valid JSON");
    return parse_hf_config(j, file.string());
}

} // namespace ninfer::io
