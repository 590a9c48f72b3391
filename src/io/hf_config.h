// The model configuration of a Qwen3.5/3.6/3.8 checkpoint, parsed from HF config.json.
// Accepts model types qwen3_5 and qwen3_5_moe (nested text_config, weights under
// model.language_model.*) and the text-only qwen3_5_text / qwen3_5_moe_text (model.layers.*).
// Missing fields take the HF class defaults (MODEL_QWEN3_5.md §1.2); contradictions are errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ninfer::io {

enum class LayerKind { LinearAttention, FullAttention };

struct ModelConfig {
    std::string model_type;      // top-level model_type of config.json
    std::string text_model_type; // qwen3_5_text or qwen3_5_moe_text
    bool moe = false;
    bool nested = false;     // text weights under model.language_model.
    bool has_vision = false; // a vision_config is present (its weights are never loaded)

    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t num_layers = 0;
    std::vector<LayerKind> layer_types;

    // Gated full attention.
    int64_t num_heads = 0;
    int64_t num_kv_heads = 0;
    int64_t head_dim = 0;
    double rope_theta = 0;
    double partial_rotary_factor = 0;
    int64_t rotary_dim = 0; // int(head_dim * partial_rotary_factor), even

    // Gated DeltaNet.
    int64_t linear_num_key_heads = 0;
    int64_t linear_num_value_heads = 0;
    int64_t linear_key_head_dim = 0;
    int64_t linear_value_head_dim = 0;
    int64_t linear_conv_kernel = 0;

    // MLP: dense SwiGLU, or MoE with a shared expert.
    int64_t intermediate_size = 0;
    int64_t moe_intermediate_size = 0;
    int64_t shared_expert_intermediate_size = 0;
    int64_t num_experts = 0;
    int64_t num_experts_per_tok = 0;

    double rms_norm_eps = 1e-6;
    bool tie_word_embeddings = false;
    int64_t mtp_num_hidden_layers = 0;
    int64_t max_position_embeddings = 0;
    std::string dtype; // checkpoint dtype as declared ("bfloat16"...), may be empty
    // quantization_config with quant_method fp8 (block-wise float8_e4m3fn weights, each with a
    // weight_scale_inv of [ceil(out / block[0]), ceil(in / block[1])]); other methods are refused.
    bool fp8 = false;
    int64_t fp8_block[2] = {128, 128};
    std::vector<int32_t> eos_token_ids;

    int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
    int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    int64_t count_layers(LayerKind kind) const;
    std::string text_prefix() const { return nested ? "model.language_model." : "model."; }
};

// Parses config.json content; `source` names the file in error messages.
ModelConfig parse_hf_config(const nlohmann::json& config, const std::string& source);
// Reads DIR/config.json, or the file itself when given a file.
ModelConfig load_hf_config(const std::filesystem::path& path);

} // namespace ninfer::io
