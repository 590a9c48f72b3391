// Block-wise fp8 weights resident on CUDA (ops/weight.h): weight-only fp8, bf16 activations.
//   linear_fp8: linear's contract (ops/linear.h) for an fp8 weight. 1..kGemvMaxRows rows take
//     the fp8 GEMV (linear_fp8.cu: one byte a weight from HBM, the code times its block scale in
//     f32, f32 accumulation); more rows the tensor-core GEMM (linear_tc_fp8: the grouped GEMM of
//     moe_grouped.h in dense mode, codes turned into bf16(code x scale) in shared memory, f32
//     accumulation); shapes neither takes dequantize the weight to a bf16 scratch, then cuBLAS.
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

// rms_norm_linear's contract (ops/linear.h) on the fp8 GEMV: h = rms_norm(x) computed inside it,
// each block staging the T normalised rows in shared memory (linear_gemv.h's
// rms_norm_linear_gemv, for fp8 weights): T * K bf16 must fit there; h 16-byte aligned like x, N
// >= 1 and y BF16 or F32. With a second weight w2 (BF16 [N2, K], contiguous, 16-byte aligned;
// y2 [T, N2] of y's dtype), also y2 = h . w2^T in the same launch (rms_norm_linear_pair).
// The caller makes sure h does not overlap x.
bool rms_norm_linear_gemv_fp8_fits(const TensorView& x, const TensorView& norm_w,
                                   const WeightView& w, const TensorView& y, const TensorView& h,
                                   const TensorView& w2 = {}, const TensorView& y2 = {});
void rms_norm_linear_gemv_fp8(const ExecContext& ctx, const TensorView& x,
                              const TensorView& norm_w, float eps, const WeightView& w,
                              const TensorView& y, const TensorView& h, const TensorView& w2 = {},
                              const TensorView& y2 = {});

bool linear_tc_fp8_fits(const TensorView& x, const WeightView& w, const TensorView& y);
// The W8A8 route (linear_fp8_w8a8.cu, sm_90 cuBLASLt): x quantized per (row, 128 columns) to
// e4m3 with f32 scales (the checkpoints' activation_scheme: dynamic), then cuBLASLt's fp8 matmul
// with the weight's 128 x 128 block scales. Needs an sm_90 device (has_block_scaled_fp8_matmul:
// not in portable mode), BF16 x and y, 128 x 128 blocks, K % 128 == 0, N % 16 == 0, y and the
// weight's codes and scales 256-byte aligned (whole allocations); returns false (nothing
// written) when cuBLASLt has no algorithm for the shape.
bool linear_w8a8_fits(const TensorView& x, const WeightView& w, const TensorView& y);
bool linear_w8a8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                 const TensorView& y, bool accumulate);
// Step 1 of it: codes[t, k] = e4m3_rn(x[t, k] / s[k / 128, t]) (saturating), s[g, t] =
// max(max_k |x[t, 128 g + k]|, 1e-12) / 448 (IEEE division); x: BF16 [T, K], K % 128 == 0;
// codes [Tp, K] and scales [K / 128, Tp] for Tp >= T rows (rows past T: zero codes).
void quantize_rows_fp8(const ExecContext& ctx, const TensorView& x, const TensorView& codes,
                       const TensorView& scales);

// linear_fp8's routes by rows and weight size (measured on the H200, bench_fp8_ops;
// bench/NOTES.md). cuBLASLt's W8A8 costs ~21 us at any size, so it pays from 5 rows on weights
// of kFp8W8a8LargeWeight elements or more, and only past the tensor-core route's rows on smaller
// ones (the 35B's o / out_proj / shared expert); the GEMV beats tensor cores to 4 rows on large
// weights, to 8 on small ones:
//   large: GEMV 1..kFp8GemvRows, then W8A8 from kFp8W8a8MinRows;
//   small: GEMV 1..kGemvMaxRows, tensor cores to kFp8TensorCoreMaxRows, W8A8 past it;
//   shapes W8A8 cannot take (all of them off sm_90 and in portable mode): the tensor cores (to
//   kFp8TensorCoreMaxRows rows), else the GEMV (to kGemvMaxRows); dequantize + cuBLAS for the
//   rest. Every route but W8A8 runs on every architecture of the build.
// These are the built-in route table's linear.fp8.* bands (ops/route_table.h); `ninfer tune`
// measures them per GPU. kFp8TensorCoreMaxRows is also the tensor-core route's domain.
inline constexpr int64_t kFp8GemvRows = 4;
inline constexpr int64_t kFp8TensorCoreMaxRows = 128;
inline constexpr int64_t kFp8W8a8MinRows = 5;
inline constexpr int64_t kFp8W8a8LargeWeight = int64_t(16) << 20;
enum class Fp8LinearRoute { Gemv, TensorCores, W8A8, Dequantize };
Fp8LinearRoute linear_fp8_route(const TensorView& x, const WeightView& w, const TensorView& y);
void linear_tc_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                   const TensorView& y, bool accumulate);

void linear_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                const TensorView& y, bool accumulate);

void dequantize_fp8(const ExecContext& ctx, const WeightView& w, const TensorView& out,
                    const TensorView& used = {});

} // namespace ninfer::ops::cuda
