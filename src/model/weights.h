// Device-resident weights of a Qwen3.5/3.6/3.8 text model, in the backend's compute dtype, or
// for an fp8 checkpoint on CUDA, the projections the checkpoint quantized as block-wise fp8
// (Weight). Projections that read the same input are fused at load (one GEMM each): GDN
// qkv|z|b|a (qkv|z and b|a when only qkv and z are fp8), attention q(+gate)|k|v, MLP gate|up,
// router|shared-expert gate.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "io/hf_config.h"
#include "ops/weight.h"

namespace ninfer::model {

using io::LayerKind;

// A projection weight [N, K] (or a stack [E, N, K]): dense in the compute dtype (scale
// undefined), or fp8 codes (F8E4M3) with their F32 block scales (ops/weight.h).
struct Weight {
    Tensor w;
    Tensor scale;
    int64_t block_rows = 0, block_cols = 0;         // fp8
    int group_bits = 0;                             // groupwise (0: not)
    int64_t group_size = 0, cols = 0;               // groupwise: the group and K

    Weight() = default;
    explicit Weight(Tensor dense) : w(std::move(dense)) {}
    operator ops::WeightView() const {
        if (group_bits) return ops::WeightView::grouped(w, scale, group_bits, group_size, cols);
        return scale.defined() ? ops::WeightView::fp8(w, scale, block_rows, block_cols)
                               : ops::WeightView(w);
    }
    bool defined() const { return w.defined(); }
    bool is_fp8() const { return scale.defined() && group_bits == 0; }
    bool is_grouped() const { return group_bits != 0; }
    int64_t size(int dim) const { return ops::WeightView(*this).size(dim); }
    int64_t nbytes() const { return w.view().nbytes() + (scale.defined() ? scale.view().nbytes() : 0); }
};

struct GdnWeights {
    Weight in_proj;    // [conv_dim + Vd + 2 Hv, H]: rows qkv | z | b | a; or, when in_proj_ba is
                       // defined, [conv_dim + Vd, H]: qkv | z
    Weight in_proj_ba; // [2 Hv, H]: b | a, when they are stored apart from qkv | z (fp8)
    Tensor conv;     // [conv_dim, K]
    Tensor A_log;    // [Hv]
    Tensor dt_bias;  // [Hv]
    Tensor norm;     // [dv] gated norm (plain weight)
    Weight out_proj; // [H, Vd]
};

struct AttentionWeights {
    Weight in_proj; // [nH*2D + 2*nKV*D, H]: rows q_proj (per head query | gate) | k_proj | v_proj
    Tensor q_norm;  // [D]
    Tensor k_norm;  // [D]
    Weight o_proj;  // [H, nH*D]
};

// Rows of the fused router weight: E experts and the shared-expert gate, padded with zero rows
// to a multiple of 8. Why: its F32 logits rows are then 16-byte aligned (E + 1 = 257 floats are
// not), and cuBLAS takes an sm_75 align-1 kernel for unaligned F32 output rows (an H100 prefill
// step of 65,536 rows spent 1.0 ms a layer there). Consumers read the first E + 1 columns.
constexpr int64_t router_rows(int64_t num_experts) {
    return (num_experts + 1 + 7) / 8 * 8;
}

struct MlpWeights {
    // Dense SwiGLU.
    Weight gate_up; // [2I, H]: gate rows then up rows
    Weight down;    // [H, I]
    // MoE.
    Tensor router;          // [router_rows(E), H]: the router's E rows, shared_expert_gate, zeros
    Weight experts_gate_up; // [E, 2Ie, H]
    Weight experts_down;    // [E, H, Ie]
    Weight shared_gate_up;  // [2Is, H]
    Weight shared_down;     // [H, Is]
};

struct LayerWeights {
    LayerKind kind = LayerKind::LinearAttention;
    Tensor input_norm; // [H]
    Tensor post_norm;  // [H]
    GdnWeights gdn;
    AttentionWeights attn;
    MlpWeights mlp;
};

// The MTP head (MODEL_QWEN3_5.md §3): bound at load; the draft forward lives with speculation.
struct MtpWeights {
    Weight fc;                        // [H, 2H]
    Tensor pre_fc_norm_embedding;     // [H]
    Tensor pre_fc_norm_hidden;        // [H]
    Tensor norm;                      // [H]
    std::vector<LayerWeights> layers; // full-attention decoder layers
};

// The vision tower (model.visual.*, MODEL_QWEN3_5.md §1.3). Linear layers keep torch's [out, in]
// layout; patch_embed's Conv3d kernel (kernel = stride) is the linear map of one flattened patch.
struct VisionBlockWeights {
    Tensor norm1_w, norm1_b, norm2_w, norm2_b; // [Dv]
    Tensor qkv_w, qkv_b;                       // [3 Dv, Dv], [3 Dv]: q | k | v, head-major
    Tensor proj_w, proj_b;                     // [Dv, Dv], [Dv]
    Tensor fc1_w, fc1_b;                       // [Iv, Dv], [Iv]
    Tensor fc2_w, fc2_b;                       // [Dv, Iv], [Dv]
};

struct VisionWeights {
    Tensor patch_w, patch_b; // [Dv, C*Tp*P*P], [Dv]
    Tensor pos_embed;        // [side*side, Dv]
    std::vector<VisionBlockWeights> blocks;
    Tensor merger_norm_w, merger_norm_b; // [Dv]
    Tensor merger_fc1_w, merger_fc1_b;   // [4 Dv, 4 Dv], [4 Dv]
    Tensor merger_fc2_w, merger_fc2_b;   // [H, 4 Dv], [H]
    bool loaded() const { return !blocks.empty(); }
};

struct ModelWeights {
    Tensor embed;      // [V, H]
    Tensor final_norm; // [H]
    Tensor lm_head;    // [V, H] (the embedding itself when tied)
    std::vector<LayerWeights> layers;
    MtpWeights mtp; // layers empty when the checkpoint has no mtp.* tensors
    VisionWeights vision; // blocks empty when the checkpoint has no model.visual.* tensors
};

} // namespace ninfer::model
