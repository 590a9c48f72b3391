// rope (partial, NeoX rotate-half), in place on the first rotary_dim dims of every head:
//   half = rotary_dim / 2;  inv_freq[j] = 1 / theta^(2j / rotary_dim), held as an f32 value like
//   HF's buffer (here the correctly rounded one; torch's vectorised pow may differ by one ulp)
//   angle = f32(positions[t]) * inv_freq[j]  (f32 product, as HF);  c = cos(angle), s = sin(angle)
//   x'[i] = x[i] c_i - x[i+half] s_i;   x'[i+half] = x[i+half] c_i + x[i] s_i   (i < half)
//   dims [rotary_dim, D) pass through. Text-only mRoPE equals this 1-D RoPE (MODEL_QWEN3_5.md §4).
//   x: [T, nH, D] float, last dim contiguous    positions: [T] I32
// Numerics: the angle is rounded to f32 like HF; the rotation itself in f32 (f64 in reference).
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void rope(const ExecContext& ctx, const TensorView& x, const TensorView& positions,
          int64_t rotary_dim, double theta);

} // namespace ninfer::ops
