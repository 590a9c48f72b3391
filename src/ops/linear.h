// linear: y[t, n] = sum_k x[t, k] * w[n, k]        (torch nn.Linear layout, no bias)
//         with accumulate: y[t, n] += sum_k x[t, k] * w[n, k]   (fused residual add)
//   x: [T, K] float, last dim contiguous     w: [N, K] float, contiguous
//   y: [T, N] float (x's dtype, or F32 for router and head logits), last dim contiguous; must not
//      overlap x or w.
// Numerics: f32 accumulation (FP64 in CPU reference mode); y rounded once.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void linear(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate = false);

} // namespace ninfer::ops
