// Sparse MoE with a sigmoid-gated shared expert (MODEL_QWEN3_5.md §2.5).
//
// moe_route: p = softmax_f32(router_logits[t, :]) over all E experts; the top_k largest p in
//   descending order (ties: lower expert id first) give ids[t, :]; weights[t, :] = p / sum(top p).
//   router_logits: [T, E] F32    weights: [T, top_k] F32    ids: [T, top_k] I32
//
// moe_experts: y[t, :] += sum_j weights[t, j] * down[e] @ (silu(G_e x[t]) * (U_e x[t])),
//   e = ids[t, j], [G_e; U_e] = gate_up[e] (rows [0, I) gate, [I, 2I) up).
//   x: [T, H] float   gate_up: [E, 2I, H] float   down: [E, H, I] float   y: [T, H] float
//   y must not alias x. Accumulates into y.
//
// add_sigmoid_scaled: y[t, :] += sigmoid(gate_logit[t, 0]) * shared[t, :]
//   gate_logit: [T, 1] F32 (the router's extra column)    shared, y: [T, H] float
// Numerics: f32 (f64 in CPU reference mode). Workspace: none (CPU gathers per expert).
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids);

void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y);

// Whether moe_experts runs for T * top_k = pairs (with hidden H and expert width I) without
// synchronising with the host, so that it can be captured into a graph (ops/memory.h).
bool moe_experts_capturable(const ExecContext& ctx, int64_t pairs, int64_t H, int64_t I);

void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y);

} // namespace ninfer::ops
