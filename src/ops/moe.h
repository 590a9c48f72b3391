// Sparse MoE with a sigmoid-gated shared expert (MODEL_QWEN3_5.md §2.5).
//
// Expert parallelism: a stack may hold one run of the router's experts, `held`: global ids
// [held.first, held.first + held.count) are its rows [0, held.count). Pairs routed to experts
// outside the run are another rank's: ids -1, and they contribute nothing here.
//
// moe_route: p = softmax_f32(router_logits[t, :]) over all E experts; the top_k largest p in
//   descending order (ties: lower expert id first) give the chosen experts e_j; weights[t, j] =
//   p(e_j) / sum(top p) (over all top_k, held or not); ids[t, j] = e_j - held.first when e_j is
//   held, else -1 (held = all E by default: ids are the expert ids).
//   router_logits: [T, E] F32    weights: [T, top_k] F32    ids: [T, top_k] I32
//
// moe_experts: y[t, :] += sum_j weights[t, j] * down[e] @ (silu(G_e x[t]) * (U_e x[t])),
//   e = ids[t, j] (pairs with e = -1 skipped), [G_e; U_e] = gate_up[e] (rows [0, I) gate,
//   [I, 2I) up).
//   x: [T, H] float   gate_up: [E, 2I, H] float   down: [E, H, I] float   y: [T, H] float
//   y must not alias x. Accumulates into y.
//   CUDA routes (ops/cuda/moe.cu): per-pair GEMVs to 64 pairs; past them the pairs are put in
//   expert order on the device and two grouped GEMMs run, on mma.sync tiles or, for bf16 stacks
//   where route decision moe_experts.bf16 says so (sm_90 only), CUTLASS's wgmma grouped GEMM.
//   Every route: f32 accumulation; act = silu(gate) * up in f32 (the GEMVs) or rounded once to
//   the activation dtype (the grouped GEMMs); the down products in f32, except on the CUTLASS
//   wgmma routes, whose gate/up and down products are rounded once to bf16 (as a bf16
//   checkpoint's expert linears round them); the k weighted outputs combined in f32 in a fixed
//   order and added to y with one rounding. A row's result does not depend on the other rows
//   (deterministic).
//
// add_sigmoid_scaled: y[t, :] += sigmoid(gate_logit[t, 0]) * shared[t, :]
//   gate_logit: [T, 1] F32 (the router's extra column)    shared, y: [T, H] float
// moe_block: the whole sparse-MoE block of a layer after its router linear:
//   y[t, :] += sum_j w[t, j] * down[e] @ (silu(G_e h[t]) * (U_e h[t]))                (routed)
//            + sigmoid(router_logits[t, E]) * Ds @ (silu(Gs h[t]) * (Us h[t]))          (shared)
//   with (w, e) = moe_route(router_logits[:, :E], top_k) and [Gs; Us] = shared_gate_up. The
//   stacks hold the Eh experts [first_expert, first_expert + Eh) of the router's E (expert
//   parallelism; all of them by default): the routed sum runs over the held pairs only.
//   h: [T, H] float   router_logits: [T, E + 1] F32 (column E: the shared-expert gate logit)
//   experts_gate_up: [Eh, 2I, H]   experts_down: [Eh, H, I]   shared_gate_up: [2Is, H]
//   shared_down: [H, Is]   y: [T, H] (accumulated into; must not alias h). One float dtype.
//   The CPU body (both modes) is the composition moe_route, moe_experts, linear, silu_mul,
//   linear, add_sigmoid_scaled, so its numerics are those ops' (the shared expert's output is
//   rounded to the activation dtype before it is added). CUDA at decode sizes (T * top_k <= 64,
//   H, I, Is multiples of 8, 16-byte aligned rows) runs two fused kernels: f32 activations, the
//   routed and shared contributions summed in f32 in a fixed order and added to y with one
//   rounding (deterministic, and each row's bits independent of the other rows of the call);
//   larger T runs the composition.
//   Block-wise fp8 weights (ops/weight.h; CUDA with BF16 h and y): the decode route reads the
//   codes when all four weights are fp8, up to T * top_k <= 192 (moe_decode.cu); otherwise the
//   composition runs the grouped route on the codes (turned into bf16 tiles, bf16 activations),
//   or, where route decision moe_experts.fp8 gives it the pairs (sm_90, 128 x 128 blocks), the
//   W8A8 route: activations quantized to e4m3 per row and 128 columns, as the W8A8 linear does,
//   and CUTLASS's block-scaled fp8 wgmma grouped GEMM (ops/cuda/moe_w8a8.h; act computed in f32
//   from the bf16 gate/up rows and quantized, not rounded to bf16). Stacks those routes do not take
//   are dequantized (only the experts some pair uses) to bf16 scratch. The CPU dequantizes first.
// Numerics: f32 (f64 in CPU reference mode). Workspace: none (CPU gathers per expert; moe_block
// allocates its scratch from the device allocator: routes and activations, O(T * top_k * I)).
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops {

// A run of the router's experts that a stack holds (count -1: every expert from first on).
struct HeldExperts {
    int64_t first = 0;
    int64_t count = -1;
};

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, HeldExperts held = {});

void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y);

// Whether moe_experts runs for T * top_k = pairs (with hidden H and expert width I) without
// synchronising with the host, so that it can be captured into a graph (ops/memory.h).
bool moe_experts_capturable(const ExecContext& ctx, int64_t pairs, int64_t H, int64_t I);

void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y);

void moe_block(const ExecContext& ctx, const TensorView& h, const TensorView& router_logits,
               int64_t top_k, const WeightView& experts_gate_up, const WeightView& experts_down,
               const WeightView& shared_gate_up, const WeightView& shared_down,
               const TensorView& y, int64_t first_expert = 0);

// Whether moe_block over T rows runs without synchronising with the host (capturable).
bool moe_block_capturable(const ExecContext& ctx, int64_t T, int64_t top_k, int64_t H, int64_t I);

} // namespace ninfer::ops
