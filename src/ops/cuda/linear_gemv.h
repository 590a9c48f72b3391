// The small-T (decode) route of linear on CUDA, linear_gemv.cu: one warp per output column with
// 16-byte weight loads. linear (linear.cu) takes it for T <= kGemvMaxRows when it fits; cuBLAS
// takes the rest. Also called directly by the op benchmark to compare the two routes.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

// Rows up to which linear takes the GEMV route: each row adds T x-loads per weight load, and from
// about 8 rows on cuBLAS's tensor-core GEMM reads the weights at the same rate (bench_decode_ops).
constexpr int64_t kGemvMaxRows = 8;

// BF16 x and w, 1..kGemvMaxRows rows, K % 8 == 0, 16-byte aligned rows.
bool linear_gemv_fits(const TensorView& x, const TensorView& w);

// linear's contract (ops/linear.h) for shapes linear_gemv_fits accepts; y BF16 or F32.
void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate);

// cuBLAS's route for the same contract (every shape).
void linear_cublas(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& y, bool accumulate);

} // namespace ninfer::ops::cuda
