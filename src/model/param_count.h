// Parameter counts and memory needs of a configuration, without loading weights (ninfer info).
#pragma once

#include <cstdint>

#include "core/checked.h"
#include "core/dtype.h"
#include "io/hf_config.h"
#include "ops/kv_cache.h"

namespace ninfer::model {

struct ParamCounts {
    int64_t embedding = 0;
    int64_t lm_head = 0;          // 0 when tied to the embedding
    int64_t gdn_layers = 0;       // all GDN token mixers
    int64_t attention_layers = 0; // all full-attention token mixers
    int64_t mlp = 0;              // all MLP / MoE blocks (routed experts included)
    int64_t norms = 0;            // layer norms and the final norm
    int64_t text_total = 0;       // everything above
    int64_t active_per_token = 0; // text params read per token (MoE: top-k experts + shared)
    int64_t mtp = 0;              // the MTP head, for mtp_layers layers
    // Of active_per_token, the params of the projections the official FP8 releases quantize
    // (attention q/k/v/o, GDN in_proj_qkv/z and out_proj, dense/shared/routed MLP), which a
    // resident fp8 model reads as one byte each (plus an F32 scale per 128 x 128 block).
    int64_t active_fp8_quantized = 0;
    int64_t text_fp8_quantized = 0; // the same over all of text_total (every expert)
    // (Resident groupwise weights, --group-weights resident, keep the same set as codes.)
};

// Bytes of weights one decode token reads: bf16 (2 bytes a param), or with fp8 resident
// weights, one byte per quantized param plus its block scales.
int64_t active_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems = 128 * 128);
// Bytes of the text weights held in memory: bf16, or with fp8 resident weights (as above).
int64_t text_weight_bytes(const ParamCounts& p, bool fp8_resident, int64_t block_elems = 128 * 128);
// Bytes per resident fp8 parameter: its code and its share of its block's F32 scale.
inline double fp8_bytes_per_param(int64_t block_elems = 128 * 128) {
    return 1.0 + 4.0 / double(block_elems);
}

// Bytes of `total` params of which `quantized` are groupwise codes of `bits` bits with a
// `scale_bytes` scale per `group` of them, the rest bf16 (a decode token's reads:
// active_per_token and active_fp8_quantized; memory: text_total and text_fp8_quantized).
int64_t grouped_weight_bytes(int64_t total, int64_t quantized, int bits, int64_t group,
                             int scale_bytes);

ParamCounts count_params(const io::ModelConfig& config, int64_t mtp_layers);

// One layer's parameters by part: count_params sums them, and the multi-GPU planners
// (runtime/placement.h) place them. Checked sizes (an overflow is an error, not a wrapped count).
struct LayerParamParts {
    Size attention_q_o, attention_kv, attention_norms; // q (query | gate) + o; k + v; q/k norms
    Size gdn_split, gdn_norm; // every GDN tensor that divides with its heads; the gated norm
    Size mlp_rows;            // the dense MLP, or the shared expert's gate/up/down
    Size experts;             // all routed experts
    Size router;              // router + shared_expert_gate
    Size norms;               // input and post-attention norms
};
LayerParamParts layer_param_parts(const io::ModelConfig& config);

// Bytes of per-sequence state: KV per token (all full-attention layers, K and V: codes and
// scales of the KV dtype, ops/kv_cache.h), and the fixed GDN state (conv history + recurrent
// state, f32 by default or bf16 with --gdn-state-dtype bf16, all GDN layers).
int64_t kv_bytes_per_token(const io::ModelConfig& config, ops::KvDtype kv_dtype, DType activation);
int64_t gdn_state_bytes_per_sequence(const io::ModelConfig& config, int64_t conv_element_bytes,
                                     int64_t state_element_bytes = 4);

// The bytes one decode step of `batch` sequences reads, `context` KV tokens each: the memory
// roofline of `ninfer bench` and of bench/serve/decode_roofline.py (through `ninfer info
// --decode-batch`). weight_bytes is one token's read (active_weight_bytes: the top-k experts of
// each MoE layer); a batch reads instead the experts some sequence routes to, E (1 - (1 -
// k/E)^batch) of each layer's E under uniform routing (the random-weight router's; a trained
// router concentrates, so this bounds the bytes from above). expert_param_bytes: bytes per
// routed-expert parameter as resident (2 bf16, 4 f32, ~1 fp8 with its block scales). Each
// sequence's KV is read and its GDN state read and written.
struct DecodeStepBytes {
    double weights_every_token = 0; // weight_bytes less the top-k experts
    double routed_experts = 0;      // the experts the batch routes to
    double gdn_state = 0;
    double kv = 0;
    double total() const { return weights_every_token + routed_experts + gdn_state + kv; }
};
DecodeStepBytes decode_step_bytes(const io::ModelConfig& config, int64_t weight_bytes,
                                  double expert_param_bytes, int64_t batch, double context,
                                  int64_t kv_bytes_per_token, int64_t gdn_state_bytes);

} // namespace ninfer::model
