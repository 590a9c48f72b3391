// Block-wise fp8 weights resident on CUDA (ops/weight.h): weight-only fp8, bf16 activations.
//   linear_fp8: linear's contract (ops/linear.h) for an fp8 weight. 1..kGemvMaxRows rows take
//     the fp8 GEMV (linear_fp8.cu: one byte a weight from HBM, the code times its block scale in
//     f32, f32 accumulation); more rows dequantize the weight to a bf16 scratch and run cuBLAS.
//   dequantize_fp8: out[.., n, k] = bf16(e4m3(q[.., n, k]) * scale[.., n / Br, k / Bc]) for a
//     2-D weight or a 3-D stack; with `used` (I32 [E], 3-D only) the experts whose flag is 0 are
//     skipped (their rows of out are left as they were).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops::cuda {

// Whether the fp8 GEMV takes x [T, K] (T <= kGemvMaxRows, BF16, 16-byte aligned rows) times w.
bool linear_gemv_fp8_fits(const TensorView& x, const WeightView& w);
void linear_gemv_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                     const TensorView& y, bool accumulate);

void linear_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                const TensorView& y, bool accumulate);

void dequantize_fp8(const ExecContext& ctx, const WeightView& w, const TensorView& out,
                    const TensorView& used = {});

} // namespace ninfer::ops::cuda
