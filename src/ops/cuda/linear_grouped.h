// Groupwise W8/Q4 weights resident on CUDA (ops/weight.h; the layout of model/groupwise.h):
// weight-only integers, bf16 activations.
//   linear_grouped: linear's contract (ops/linear.h) for a groupwise weight. 1..kGemvMaxRows rows
//     take the groupwise GEMV when it fits (linear_grouped.cu: one byte (w8) or half a byte (q4) a
//     weight from HBM, the code times its group's scale in f32, f32 accumulation); everything else
//     dequantizes the weight to bf16 in row chunks of the stream workspace and runs cuBLAS on each
//     chunk's columns of y.
//   dequantize_grouped: out[.., n, k] = bf16(q[.., n, k] * scale[.., n, k / G]) (one rounding),
//     for a 2-D weight or a 3-D stack; with `used` (I32 [E], 3-D only) the experts whose flag is
//     0 are skipped (their rows of out are left as they were).
// The CPU reference of both is the dense op on the dequantized weight (dense_on_host).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops::cuda {

// Whether the GEMV takes x [T, K] (T <= kGemvMaxRows, BF16, 16-byte aligned rows) times w: codes
// of one 16-byte load share a scale (G % 16 == 0 for w8, G % 32 == 0 for q4), K a multiple of the
// codes per load (16 or 32), 16-byte aligned codes.
bool linear_gemv_grouped_fits(const TensorView& x, const WeightView& w);
void linear_gemv_grouped(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                         const TensorView& y, bool accumulate);

void linear_grouped(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                    const TensorView& y, bool accumulate);

// w: a groupwise weight [N, K] or stack [E, N, K]; out: contiguous BF16 of that shape.
void dequantize_grouped(const ExecContext& ctx, const WeightView& w, const TensorView& out,
                        const TensorView& used = {});

} // namespace ninfer::ops::cuda
