// gated_rms_norm (GDN output norm, plain weight): per row r of D values
//   n[r, i] = x[r, i] * rsqrt(mean_j x[r, j]^2 + eps)
//   y[r, i] = w[i] * n[r, i] * silu(z[r, i])            (norm first, then the SiLU gate)
//   x, z (gate), y: row views [R, D] or [A, B, D] with the same leading shape, contiguous last
//   dims (the model passes [T, Hv, dv]); w: [D] float; y may alias x exactly.
// Numerics: f32 (f64 in CPU reference mode); y rounded once. Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void gated_rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& z,
                    const TensorView& w, float eps, const TensorView& y);

} // namespace ninfer::ops
