// layer_norm (torch.nn.LayerNorm with weight and bias; the vision tower's norm):
//   y[t, i] = (x[t, i] - mean) / sqrt(var + eps) * w[i] + b[i],  mean = sum_j x[t, j] / K,
//   var = sum_j (x[t, j] - mean)^2 / K  (biased), over the K values of row t
//   x: [T, K] float (or an [A, B, K] row view), last dim contiguous, other strides free
//   y: x's leading shape and dtype, last dim contiguous; may alias x exactly
//   w, b: [K] contiguous, one dtype for both: x's, or F32
// Numerics: mean and variance in f32, two passes (f64 in CPU reference mode); y rounded once.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void layer_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                const TensorView& b, float eps, const TensorView& y);

} // namespace ninfer::ops
