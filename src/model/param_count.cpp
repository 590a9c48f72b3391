#include "model/param_count.h"

#include <cmath>

#include "core/checked.h"

namespace ninfer::model {
namespace {

using io::LayerKind;
using io::ModelConfig;

// Every count is a checked Size: the config reader bounds each field (io/hf_config.cpp), and
// an overflow past those bounds is an error rather than a wrapped count.
Size gdn_params(const ModelConfig& c) {
    const LayerParamParts p = layer_param_parts(c);
    return p.gdn_split + p.gdn_norm;
}

Size attention_params(const ModelConfig& c) {
    const LayerParamParts p = layer_param_parts(c);
    return p.attention_q_o + p.attention_kv + p.attention_norms;
}

// {all MLP params, params read per token}.
std::pair<Size, Size> mlp_params(const ModelConfig& c) {
    const LayerParamParts p = layer_param_parts(c);
    if (!c.moe) return {p.mlp_rows, p.mlp_rows};
    const Size expert = Size(3) * c.moe_intermediate_size * c.hidden_size;
    const Size fixed = p.router + p.mlp_rows;
    return {fixed + p.experts, fixed + Size(c.num_experts_per_tok) * expert};
}

// Params of one layer's mixer that the FP8 releases quantize.
Size quantized_mixer_params(const ModelConfig& c, LayerKind kind) {
    const Size H = c.hidden_size, D = c.head_dim;
    if (kind == LayerKind::LinearAttention)
        return Size(c.conv_dim()) * H + Size(c.value_dim()) * H + H * c.value_dim();
    return Size(c.num_heads) * 2 * D * H + Size(2) * c.num_kv_heads * D * H + H * c.num_heads * D;
}

// MLP params that the FP8 releases quantize (not the router or shared gate), over `experts`
// routed experts (top-k: read per token; all: held).
Size quantized_mlp(const ModelConfig& c, int64_t experts) {
    const Size H = c.hidden_size;
    if (!c.moe) return Size(3) * c.intermediate_size * H;
    return Size(experts) * 3 * c.moe_intermediate_size * H +
           Size(3) * c.shared_expert_intermediate_size * H;
}

// 2 bytes a dense param, 1 a quantized one plus an F32 scale per block.
int64_t bytes_with_fp8(Size total, Size quantized, int64_t block_elems) {
    return int64_t(Size(2) * (total - quantized) + quantized +
                   Size(4) * ((quantized.v + block_elems - 1) / block_elems));
}

} // namespace

LayerParamParts layer_param_parts(const ModelConfig& c) {
    const Size H = c.hidden_size, D = c.head_dim;
    LayerParamParts p;
    p.attention_q_o = Size(c.num_heads) * 2 * D * H + H * c.num_heads * D; // q | gate, o
    p.attention_kv = Size(2) * c.num_kv_heads * D * H;
    p.attention_norms = Size(2) * D;
    const Size Hv = c.linear_num_value_heads, conv = c.conv_dim(), value = c.value_dim();
    p.gdn_split = conv * H + value * H + Size(2) * Hv * H // in_proj qkv, z, b, a
                  + conv * c.linear_conv_kernel           // conv1d
                  + Size(2) * Hv                          // A_log, dt_bias
                  + H * value;                            // out_proj
    p.gdn_norm = Size(c.linear_value_head_dim);
    if (c.moe) {
        p.mlp_rows = Size(3) * c.shared_expert_intermediate_size * H;
        p.experts = Size(c.held_experts()) * 3 * c.moe_intermediate_size * H;
        p.router = Size(c.num_experts + 1) * H; // router + shared_expert_gate
    } else {
        p.mlp_rows = Size(3) * c.intermediate_size * H;
    }
    p.norms = Size(2) * H;
    return p;
}

int64_t active_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems) {
    return fp8_resident ? bytes_with_fp8(p.active_per_token, p.active_fp8_quantized, block_elems)
                        : int64_t(Size(2) * p.active_per_token);
}

int64_t text_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems) {
    return fp8_resident ? bytes_with_fp8(p.text_total, p.text_fp8_quantized, block_elems)
                        : int64_t(Size(2) * p.text_total);
}

int64_t grouped_weight_bytes(int64_t total, int64_t quantized, int bits, int64_t group,
                             int scale_bytes) {
    const Size q = quantized;
    const Size codes = bits == 8 ? q : Size((q.v + 1) / 2);
    return int64_t(Size(2) * (Size(total) - q) + codes +
                   Size(scale_bytes) * ((q.v + group - 1) / group));
}

ParamCounts count_params(const ModelConfig& c, int64_t mtp_layers) {
    const Size H = c.hidden_size, vocab = c.vocab_size;
    const auto [mlp_all, mlp_active] = mlp_params(c);
    Size gdn, attention, mlp, norms, active_layers, active_fp8, text_fp8;
    for (LayerKind kind : c.layer_types) {
        const bool linear = kind == LayerKind::LinearAttention;
        const Size mixer = linear ? gdn_params(c) : attention_params(c);
        (linear ? gdn : attention) += mixer;
        mlp += mlp_all;
        norms += Size(2) * H;
        active_layers += mixer + mlp_active + Size(2) * H;
        active_fp8 += quantized_mixer_params(c, kind) + quantized_mlp(c, c.num_experts_per_tok);
        text_fp8 += quantized_mixer_params(c, kind) + quantized_mlp(c, c.held_experts());
    }
    norms += H;
    ParamCounts p;
    const Size embedding = vocab * H, lm_head = c.tie_word_embeddings ? Size(0) : vocab * H;
    p.embedding = embedding.v;
    p.lm_head = lm_head.v;
    p.gdn_layers = gdn.v;
    p.attention_layers = attention.v;
    p.mlp = mlp.v;
    p.norms = norms.v;
    p.text_total = (embedding + lm_head + gdn + attention + mlp + norms).v;
    // Per token: one embedding row, all layers' active params, the final norm and the head.
    p.active_per_token = (H + active_layers + H + vocab * H).v;
    p.active_fp8_quantized = active_fp8.v;
    p.text_fp8_quantized = text_fp8.v;
    if (mtp_layers > 0)
        p.mtp = (Size(2) * H * H + Size(3) * H +
                 Size(mtp_layers) * (attention_params(c) + mlp_all + Size(2) * H)).v;
    return p;
}

int64_t kv_bytes_per_token(const ModelConfig& c, ops::KvDtype kv_dtype, DType activation) {
    return int64_t(Size(c.count_layers(LayerKind::FullAttention)) * 2 * c.num_kv_heads *
                   ops::kv_row_bytes(kv_dtype, activation, c.head_dim));
}

int64_t gdn_state_bytes_per_sequence(const ModelConfig& c, int64_t conv_element_bytes,
                                     int64_t state_element_bytes) {
    const Size per_layer = Size(c.conv_dim()) * (c.linear_conv_kernel - 1) * conv_element_bytes +
                           Size(c.linear_num_value_heads) * c.linear_key_head_dim *
                               c.linear_value_head_dim * state_element_bytes;
    return int64_t(Size(c.count_layers(LayerKind::LinearAttention)) * per_layer);
}

DecodeStepBytes decode_step_bytes(const ModelConfig& c, int64_t weight_bytes,
                                  double expert_param_bytes, int64_t batch, double context,
                                  int64_t kv_bytes_per_token, int64_t gdn_state_bytes) {
    DecodeStepBytes b;
    b.weights_every_token = double(weight_bytes);
    if (c.num_experts > 0) {
        const double E = double(c.num_experts), k = double(c.num_experts_per_tok);
        const double expert = double(layer_param_parts(c).experts.v) / E * expert_param_bytes;
        const double layers = double(c.num_layers);
        b.weights_every_token -= layers * k * expert;
        b.routed_experts = layers * E * (1.0 - std::pow(1.0 - k / E, double(batch))) * expert;
    }
    b.gdn_state = 2.0 * double(batch) * double(gdn_state_bytes);
    b.kv = double(batch) * context * double(kv_bytes_per_token);
    return b;
}

} // namespace ninfer::model
