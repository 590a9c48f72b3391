// Gated DeltaNet core (MODEL_QWEN3_5.md §2.3).
//
// gdn_gates: beta[t, h] = sigmoid(b[t, h]);  g[t, h] = -exp(A_log[h]) * softplus(a[t, h] +
// dt_bias[h])
//   a, b: [T, Hv] float (rows contiguous)   A_log, dt_bias: [Hv] float
//   g, beta: [T, Hv] F32. softplus(u) = u for u > 20, else log1p(exp(u)) (torch's threshold).
//
// gated_delta_rule: per sequence and value head h (qk head h / (Hv/Hk)), state S [dk, dv]:
//   k^ = k * rsqrt(sum k^2 + 1e-6);  q^ = q * rsqrt(sum q^2 + 1e-6) / sqrt(dk)
//   for each row in order: S = exp(g) S;  u = beta (v - S^T k^);  S += k^ u^T;  out = S^T q^
//   q, k: [T, Hk, dk] float, last dim contiguous (strided views into the conv output are fine)
//   v: [T, Hv, dv] float, last dim contiguous     g, beta: [T, Hv] F32
//   state: [S_slots, Hv, dk, dv] F32 or BF16, read from and written back to each sequence's
//     slot; with per-row snapshots (seq_batch.h) the state after each earlier row also goes to
//     its snapshot row (such sequences always take the recurrence). Stored state: every route
//     reads it to its accumulator (f32; f64 in CPU reference mode), runs all of the call's rows
//     there and rounds once per store (f32, then bf16 round-to-nearest-even for BF16): a BF16
//     state changes nothing but the stored values (a call's outputs equal the F32 state's from
//     the same start), at half the bytes per slot and per decode step.
//   out: [T, Hv, dv] float, contiguous
// Algorithms: Recurrent (the loop above) and Chunked (the WY/UT form with chunk 64, equal in exact
// arithmetic); Auto picks per sequence. CPU reference mode runs the recurrence in f64.
// Workspace: none (CPU uses per-thread scratch).
//
// gdn_core: the Gated DeltaNet core of one layer, from in_proj's output to out_proj's input
// (MODEL_QWEN3_5.md §2.3 steps 2-8), over any ragged batch. It is, by definition, the composition
//   causal_conv1d_silu(qkv, conv_w, batch, conv_state) -> conv_out               [T, C]
//   gdn_gates(a, b, A_log, dt_bias) -> g, beta                                    [T, Hv]
//   gated_delta_rule(q, k, v = conv_out columns [0, Kd), [Kd, 2 Kd), [2 Kd, C) as heads, g,
//                    beta, batch, recurrent_state) -> core                         [T, Hv, dv]
//   gated_rms_norm(core, z viewed [T, Hv, dv], norm_w, eps) -> core (in place)
//   with Kd = Hk dk and C = 2 Kd + Hv dv: (Hv, dk, dv) come from recurrent_state, and
//   Hk = (C - Hv dv) / (2 dk), which must divide Hv.
//   qkv: [T, C]  z: [T, Hv * dv]  b, a: [T, Hv]: float, last dim contiguous, any row stride (the
//     model passes column ranges of in_proj's output)
//   conv_w: [C, K] (K in [2, 9])  A_log, dt_bias: [Hv]  norm_w: [dv]: the activation dtype
//   conv_state: [S_slots, C, K-1] activation dtype, recurrent_state: [S_slots, Hv, dk, dv] F32
//     or BF16 (stored as gated_delta_rule's state), both contiguous, read from and written back
//     to each sequence's slot (and, with per-row snapshots, the state after each earlier row to
//     the snapshot rows: seq_batch.h)
//   conv_out: [T, C] activation dtype, rows contiguous, must not alias qkv; g, beta: [T, Hv] F32:
//     scratch, left unspecified (the fused CUDA route does not write them)
//   core: [T, Hv, dv] activation dtype, contiguous: the output
// Numerics: the composition's. The CPU body (both modes) runs the four ops. CUDA runs one kernel
// when every sequence has at most one row (decode), dk = dv = 128, K = 4 and Hv / Hk <= 8 on
// sm_90+, with the unfused kernels' rounding points (conv output and beta rounded to the
// activation dtype, the core output rounded before the norm, the normalised value rounded before
// the weight) and their f32 reduction orders; other batches and shapes run the four ops.
// Workspace: none beyond conv_out, g and beta.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/seq_batch.h"

namespace ninfer::ops {

enum class GdnAlgo { Auto, Recurrent, Chunked };

void gdn_gates(const ExecContext& ctx, const TensorView& a, const TensorView& b,
               const TensorView& A_log, const TensorView& dt_bias, const TensorView& g,
               const TensorView& beta);

void gated_delta_rule(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& g, const TensorView& beta,
                      const SeqBatch& batch, const TensorView& state, const TensorView& out,
                      GdnAlgo algo = GdnAlgo::Auto);

void gdn_core(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
              const TensorView& b, const TensorView& a, const TensorView& conv_w,
              const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
              float eps, const SeqBatch& batch, const TensorView& conv_state,
              const TensorView& recurrent_state, const TensorView& conv_out, const TensorView& g,
              const TensorView& beta, const TensorView& core);

} // namespace ninfer::ops
