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

// vision_config of a multimodal checkpoint (MODEL_QWEN3_5.md §1.2): a ViT over patches of
// temporal_patch x patch x patch pixels, merged spatial_merge x spatial_merge into the text
// hidden size (out_hidden_size).
struct VisionConfig {
    int64_t depth = 27;
    int64_t hidden_size = 1152;
    int64_t num_heads = 16;
    int64_t intermediate_size = 4304;
    int64_t in_channels = 3;
    int64_t patch_size = 16;
    int64_t temporal_patch_size = 2;
    int64_t spatial_merge_size = 2;
    int64_t num_position_embeddings = 2304; // a square grid: side = sqrt
    int64_t out_hidden_size = 0;
    double rope_theta = 10000.0; // the axial 2-D rotary of the blocks
    int64_t head_dim() const { return hidden_size / num_heads; }
    int64_t patch_values() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
    int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
    int64_t grid_side() const; // sqrt(num_position_embeddings)
};

struct ModelConfig {
    std::string model_type;      // top-level model_type of config.json
    std::string text_model_type; // qwen3_5_text or qwen3_5_moe_text
    bool moe = false;
    bool nested = false;     // text weights under model.language_model.
    bool has_vision = false; // a vision_config is present (vision holds it)
    VisionConfig vision;
    // Special token ids of multimodal prompts (top-level config.json fields).
    int32_t image_token_id = 248056, video_token_id = 248057;
    int32_t vision_start_token_id = 248053, vision_end_token_id = 248054;

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
    // mRoPE: frequency j takes its angle from axis 1 (height) when j % 3 == 1 and
    // j < 3 * mrope_section[1], from axis 2 (width) when j % 3 == 2 and j < 3 * mrope_section[2],
    // else from axis 0 (temporal): HF's interleaved recomposition (MODEL_QWEN3_5.md §4).
    int64_t mrope_section[3] = {11, 11, 10};
    // RoPE scaling (rope_parameters.rope_type; io/rope_scaling.h): "default", "linear" or "yarn".
    // The scaled types set rope_inv_freq [rotary_dim / 2] (HF's inverse frequencies, computed in
    // f64, rounded to f32) and rope_attention_factor (cos and sin are multiplied by it); empty
    // rope_inv_freq is default RoPE, rope_theta^(-2j / rotary_dim) with factor 1.
    std::string rope_type = "default";
    std::vector<float> rope_inv_freq;
    double rope_attention_factor = 1.0;
    // The longest context its positions support: max_position_embeddings, or YaRN's factor x
    // original_max_position_embeddings when larger (vLLM's derived limit).
    int64_t position_limit = 0;

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
    // The routed experts a model of these shapes holds: [first_held_expert, first_held_expert +
    // held_experts()) of the router's num_experts. All of them, except on a rank of expert
    // parallelism (model/tensor_parallel.h's shard_config sets its run).
    int64_t first_held_expert = 0;
    int64_t held_expert_count = 0; // 0: all
    int64_t held_experts() const { return held_expert_count > 0 ? held_expert_count : num_experts; }

    double rms_norm_eps = 1e-6;
    bool tie_word_embeddings = false;
    int64_t mtp_num_hidden_layers = 0;
    int64_t max_position_embeddings = 0;
    std::string dtype; // checkpoint dtype as declared ("bfloat16"...), may be empty
    // quantization_config with quant_method fp8 (block-wise float8_e4m3fn weights, each with a
    // weight_scale_inv of [ceil(out / block[0]), ceil(in / block[1])]); ninfer_groupwise below;
    // other methods are refused.
    bool fp8 = false;
    int64_t fp8_block[2] = {128, 128};
    // quantization_config with quant_method ninfer_groupwise (`ninfer convert --to w8|q4`,
    // model/groupwise.h): integer codes of group_bits (8 or 4) bits with a scale per group_size
    // input columns. 0 when the checkpoint is not groupwise.
    int group_bits = 0;
    int64_t group_size = 0;
    std::vector<int32_t> eos_token_ids;

    int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
    int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    int64_t count_layers(LayerKind kind) const;
    std::string text_prefix() const { return nested ? "model.language_model." : "model."; }
};

// Parses the vision_config object of `top` into c.vision (and the vision token ids); called by
// parse_hf_config when a vision_config is present.
void parse_vision_config(const nlohmann::json& top, ModelConfig& c, const std::string& source);

// Parses config.json content; `source` names the file in error messages.
ModelConfig parse_hf_config(const nlohmann::json& config, const std::string& source);
// Reads DIR/config.json, or the file itself when given a file.
ModelConfig load_hf_config(const std::filesystem::path& path);

} // namespace ninfer::io
