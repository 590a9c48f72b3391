// The one-row (decode) route of linear on CUDA, linear_gemv.cu: one warp per output column with
// 16-byte weight loads. linear (linear.cu) takes it for T <= kGemvMaxRows when it fits; cuBLAS
// takes the rest. Also called directly by the op benchmark to compare the two routes.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

// Rows up to which linear takes the GEMV route. Measured on the H200 (bench_decode_ops,
// 2026-11-30): at one row it reads the weights at 3.4-4.5 TB/s against cuBLAS's 0.3-4.4 (4x
// faster on the 35B's 4 MB shared-expert matrix); a multi-row version that re-read x per row lost
// to cuBLAS from two rows on (16.4 vs 14.4 us on 12352 x 2048), so it was dropped.
constexpr int64_t kGemvMaxRows = 1;

// BF16 x and w, kGemvMaxRows rows, K % 8 == 0, 16-byte aligned.
bool linear_gemv_fits(const TensorView& x, const TensorView& w);

// linear's contract (ops/linear.h) for shapes linear_gemv_fits accepts; y BF16 or F32.
void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate);

// rms_norm_linear's contract (ops/linear.h) at one row: the norm computed inside the GEMV.
bool rms_norm_linear_gemv_fits(const TensorView& x, const TensorView& norm_w, const TensorView& w,
                               const TensorView& h);
void rms_norm_linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const TensorView& w, const TensorView& y, const TensorView& h);

// cuBLAS's route for linear's contract (every shape).
void linear_cublas(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& y, bool accumulate);

} // namespace ninfer::ops::cuda
