// rope_table: NeoX rotate-half rotation of the first rotary_dim dims of every head, in place,
// with per-row angle tables (the vision tower's 2-D rotary: the caller computes the angles of
// each patch's (row, column) position, as HF does, in f32):
//   half = rotary_dim / 2;  for i < half, c = cos[t, i], s = sin[t, i]:
//   x'[i] = x[i] c - x[i+half] s;   x'[i+half] = x[i+half] c + x[i] s
//   dims [rotary_dim, D) pass through.
//   x: [T, nH, D] float, last dim contiguous (other strides free)
//   cos, sin: [T, half] F32, contiguous
// Numerics: x read as f32, products in f32 (f64 in CPU reference mode), rounded once to x's
// dtype. CUDA rounds each product before the sum (no FMA), as HF's q * cos + rotate_half(q) * sin.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void rope_table(const ExecContext& ctx, const TensorView& x, const TensorView& cos,
                const TensorView& sin, int64_t rotary_dim);

} // namespace ninfer::ops
