// The few-row (decode) route of linear on CUDA, linear_gemv.cu: one warp per output column with
// 16-byte weight loads, each weight read once for all T rows. linear (linear.cu) takes it for
// T <= kGemvMaxRows when it fits; cuBLAS takes the rest. Also called directly by the op benchmark
// to compare the two routes.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

// Rows the GEMV kernels are compiled for (1..8 supported).
constexpr int64_t kGemvMaxRows = 8;

// Whether linear (and rms_norm_linear's fused route) should take the GEMV for `rows` rows of a
// weight of `weight_bytes`, when it fits. Measured with bench_decode_ops on the H200 (2026-11-30,
// GEMV time / cuBLAS time over the Qwen3.6 decode shapes):
//   one row: 0.21-0.97 on every shape (cuBLAS reaches its GEMV rate only on large matrices);
//   2 rows: 0.36-0.91 up to 16 MiB (router, shared expert, 35B GDN out_proj), 0.91-1.3 above;
//   3-4 rows: 0.38-0.80 up to 4 MiB (router, shared expert), 1.16-1.7 from 16 MiB on;
//   5-8 rows: 0.79 on the 1 MiB router, 1.07 (2 MiB) to 2.9 on everything else.
// cuBLAS's GEMM streams large weights at the same 3.7-4.5 TB/s for 1-8 rows, while the GEMV's
// per-row work lowers its rate as rows are added.
// The boundaries are the route table's linear.bf16.* decisions (ops/route_table.h): these H200
// figures built in, or `ninfer tune`'s for the GPU at hand.
bool gemv_preferred(int64_t rows, int64_t weight_bytes);

// BF16 x and w, 1..kGemvMaxRows rows, K % 8 == 0, 16-byte aligned rows (x.data and, from two rows
// on, x.stride[0] % 8 == 0).
bool linear_gemv_fits(const TensorView& x, const TensorView& w);

// linear's contract (ops/linear.h) for shapes linear_gemv_fits accepts; y BF16 or F32.
void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate);

// rms_norm_linear's contract (ops/linear.h) at 1..kGemvMaxRows rows: the norm computed inside the
// GEMV, each block staging the T normalised rows in shared memory, so it also needs T * K bf16 to
// fit there (47 KB: 8 rows at K = 2048, 4 at K = 5120) and h's rows 16-byte aligned like x's.
// The caller makes sure h does not overlap x (block 0 writes h while other blocks still read x).
bool rms_norm_linear_gemv_fits(const TensorView& x, const TensorView& norm_w, const TensorView& w,
                               const TensorView& h);
void rms_norm_linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const TensorView& w, const TensorView& y, const TensorView& h);

// cuBLAS's route for linear's contract (every shape).
void linear_cublas(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& y, bool accumulate);

} // namespace ninfer::ops::cuda
