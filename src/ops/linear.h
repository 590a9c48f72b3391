// linear: y[t, n] = sum_k x[t, k] * w[n, k]        (torch nn.Linear layout, no bias)
//         with accumulate: y[t, n] += sum_k x[t, k] * w[n, k]   (fused residual add)
//   x: [T, K] float, last dim contiguous     w: [N, K] float, contiguous, or block-wise fp8 or
//      groupwise W8/Q4 (ops/weight.h; [N, K] is the logical shape: CUDA with BF16 x; the CPU
//      dequantizes it and runs the dense op)
//   y: [T, N] float (x's dtype, or F32 for router and head logits), last dim contiguous; must not
//      overlap x or w.
// Numerics: f32 accumulation (FP64 in CPU reference mode); y rounded once.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops {

void linear(const ExecContext& ctx, const TensorView& x, const WeightView& w, const TensorView& y,
            bool accumulate = false);

// rms_norm_linear: h = rms_norm(x, norm_w, eps) (ops/rms_norm.h), then y = linear(h, w).
//   x: [T, K] float, rows contiguous    norm_w: [K]    w: [N, K]    y: [T, N] (as linear)
//   h: [T, K] x's dtype, rows contiguous, written (the norm's other consumers read it)
// One call so a backend can fuse the two: CUDA computes the norm inside its few-row GEMV (one
// kernel instead of two per decode step) for BF16 and fp8 weights; otherwise, and on the CPU,
// exactly the two ops.
void rms_norm_linear(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                     float eps, const WeightView& w, const TensorView& y, const TensorView& h);

// rms_norm_linear_pair: rms_norm_linear(x, norm_w, eps, w, y, h), then y2 = linear(h, w2): two
// projections of the same normalised rows (the GDN's in_proj and in_proj_ba, which the fp8
// checkpoints keep in two formats).
//   w2: [N2, K]    y2: [T, N2] (as linear); the other arguments as rms_norm_linear's
// CUDA runs both in one kernel where rms_norm_linear would take the fp8 GEMV and w2 is BF16
// (its rows as extra blocks of that GEMV); otherwise, and on the CPU, exactly the two calls.
void rms_norm_linear_pair(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const WeightView& w, const TensorView& y,
                          const WeightView& w2, const TensorView& y2, const TensorView& h);

} // namespace ninfer::ops
