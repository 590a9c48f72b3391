// rms_norm: y[r, i] = x[r, i] * rsqrt(mean_j x[r, j]^2 + eps) * (weight_offset + w[i])
//   weight_offset 1 (the default): zero-centred, "Gemma style" (the Qwen3.5 model's norms);
//   weight_offset 0: the plain weight of Qwen3RMSNorm (the DFlash drafters'), which, like HF,
//   rounds the normalised value to y's dtype before the weight.
//   x: [R, H] or [A, B, H] (rows = A * B, e.g. [T, heads, head_dim] for q_norm) float, last dim
//      contiguous, other strides free (e.g. the query halves inside the fused projection output)
//   w: [H] float            y: same leading shape as x, last dim contiguous; may alias x exactly
// Numerics: mean and scaling in f32 (f64 in CPU reference mode); y rounded once to its dtype.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset = 1.0f);

} // namespace ninfer::ops
