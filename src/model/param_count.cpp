#include "model/param_count.h"

namespace ninfer::model {
namespace {

using io::LayerKind;
using io::ModelConfig;

int64_t gdn_params(const ModelConfig& c) {
    const int64_t H = c.hidden_size, Hv = c.linear_num_value_heads;
    return c.conv_dim() * H + c.value_dim() * H + 2 * Hv * H // in_proj qkv, z, b, a
           + c.conv_dim() * c.linear_conv_kernel             // conv1d
           + 2 * Hv + c.linear_value_head_dim                // A_log, dt_bias, norm
           + H * c.value_dim();                              // out_proj
}

int64_t attention_params(const ModelConfig& c) {
    const int64_t H = c.hidden_size, D = c.head_dim;
    return c.num_heads * 2 * D * H + 2 * c.num_kv_heads * D * H + 2 * D + H * c.num_heads * D;
}

// {all MLP params, params read per token}.
std::pair<int64_t, int64_t> mlp_params(const ModelConfig& c) {
    const int64_t H = c.hidden_size;
    if (!c.moe) {
        const int64_t n = 3 * c.intermediate_size * H;
        return {n, n};
    }
    const int64_t expert = 3 * c.moe_intermediate_size * H;
    const int64_t fixed = c.num_experts * H + H + 3 * c.shared_expert_intermediate_size * H;
    return {fixed + c.num_experts * expert, fixed + c.num_experts_per_tok * expert};
}

// Params of one layer's mixer that the FP8 releases quantize.
int64_t quantized_mixer_params(const ModelConfig& c, LayerKind kind) {
    const int64_t H = c.hidden_size, D = c.head_dim;
    if (kind == LayerKind::LinearAttention)
        return c.conv_dim() * H + c.value_dim() * H + H * c.value_dim();
    return c.num_heads * 2 * D * H + 2 * c.num_kv_heads * D * H + H * c.num_heads * D;
}

// MLP params that the FP8 releases quantize (not the router or shared gate), over `experts`
// routed experts (top-k: read per token; all: held).
int64_t quantized_mlp(const ModelConfig& c, int64_t experts) {
    const int64_t H = c.hidden_size;
    if (!c.moe) return 3 * c.intermediate_size * H;
    return experts * 3 * c.moe_intermediate_size * H + 3 * c.shared_expert_intermediate_size * H;
}

// 2 bytes a dense param, 1 a quantized one plus an F32 scale per block.
int64_t bytes_with_fp8(int64_t total, int64_t quantized, int64_t block_elems) {
    return 2 * (total - quantized) + quantized + 4 * ((quantized + block_elems - 1) / block_elems);
}

} // namespace

int64_t active_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems) {
    return fp8_resident ? bytes_with_fp8(p.active_per_token, p.active_fp8_quantized, block_elems)
                        : 2 * p.active_per_token;
}

int64_t text_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems) {
    return fp8_resident ? bytes_with_fp8(p.text_total, p.text_fp8_quantized, block_elems)
                        : 2 * p.text_total;
}

ParamCounts count_params(const ModelConfig& c, int64_t mtp_layers) {
    ParamCounts p;
    const int64_t H = c.hidden_size;
    p.embedding = c.vocab_size * H;
    p.lm_head = c.tie_word_embeddings ? 0 : c.vocab_size * H;
    const auto [mlp_all, mlp_active] = mlp_params(c);
    int64_t active_layers = 0;
    for (LayerKind kind : c.layer_types) {
        const int64_t mixer =
            kind == LayerKind::LinearAttention ? gdn_params(c) : attention_params(c);
        (kind == LayerKind::LinearAttention ? p.gdn_layers : p.attention_layers) += mixer;
        p.mlp += mlp_all;
        p.norms += 2 * H;
        active_layers += mixer + mlp_active + 2 * H;
        p.active_fp8_quantized +=
            quantized_mixer_params(c, kind) + quantized_mlp(c, c.num_experts_per_tok);
        p.text_fp8_quantized += quantized_mixer_params(c, kind) + quantized_mlp(c, c.num_experts);
    }
    p.norms += H;
    p.text_total = p.embedding + p.lm_head + p.gdn_layers + p.attention_layers + p.mlp + p.norms;
    // Per token: one embedding row, all layers' active params, the final norm and the head.
    p.active_per_token = H + active_layers + H + c.vocab_size * H;
    if (mtp_layers > 0)
        p.mtp = 2 * H * H + 3 * H + mtp_layers * (attention_params(c) + mlp_all + 2 * H);
    return p;
}

int64_t kv_bytes_per_token(const ModelConfig& c, ops::KvDtype kv_dtype, DType activation) {
    return c.count_layers(LayerKind::FullAttention) * 2 * c.num_kv_heads *
           ops::kv_row_bytes(kv_dtype, activation, c.head_dim);
}

int64_t gdn_state_bytes_per_sequence(const ModelConfig& c, int64_t conv_element_bytes) {
    const int64_t per_layer =
        c.conv_dim() * (c.linear_conv_kernel - 1) * conv_element_bytes +
        c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim * 4;
    return c.count_layers(LayerKind::LinearAttention) * per_layer;
}

} // namespace ninfer::model
