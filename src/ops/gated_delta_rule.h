// Gated DeltaNet core (MODEL_QWEN3_5.md §2.3).
//
// gdn_gates: beta[t, h] = sigmoid(b[t, h]);  g[t, h] = -exp(A_log[h]) * softplus(a[t, h] +
// dt_bias[h])
//   a, b: [T, Hv] float (rows contiguous)   A_log, dt_bias: [Hv] float
//   g, beta: [T, Hv] F32. softplus(u) = u for u > 20, else log1p(exp(u)) (torch's threshold).
//
// gated_delta_rule: per sequence and value head h (qk head h / (Hv/Hk)), state S [dk, dv] fp32:
//   k^ = k * rsqrt(sum k^2 + 1e-6);  q^ = q * rsqrt(sum q^2 + 1e-6) / sqrt(dk)
//   for each row in order: S = exp(g) S;  u = beta (v - S^T k^);  S += k^ u^T;  out = S^T q^
//   q, k: [T, Hk, dk] float, last dim contiguous (strided views into the conv output are fine)
//   v: [T, Hv, dv] float, last dim contiguous     g, beta: [T, Hv] F32
//   state: [S_slots, Hv, dk, dv] F32, read from and written back to each sequence's slot
//   out: [T, Hv, dv] float, contiguous
// Algorithms: Recurrent (the loop above) and Chunked (the WY/UT form with chunk 64, equal in exact
// arithmetic); Auto picks per sequence. CPU reference mode runs the recurrence in f64.
// Workspace: none (CPU uses per-thread scratch).
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

} // namespace ninfer::ops
