// The W8A8 grouped expert GEMM on sm_90's wgmma with TMA: CUTLASS's persistent, warp-specialized
// ptr-array grouped GEMM with block-wise fp8 scaling (KernelPtrArrayTmaWarpSpecializedCooperative
// FP8Blockwise; headers from PyPI's nvidia-cutlass, cmake/cutlass.cmake), compiled for sm_90a
// alone in moe_grouped_sm90_fp8.cu. moe_experts' grouped route (moe.cu) takes it for block-wise
// fp8 expert stacks (128 x 128 blocks) where route table decision "moe_experts.fp8" gives it the
// pair count and wgmma_fp8_grouped_fits says yes; otherwise the mma.sync tiles on bf16
// activations run (moe_grouped.h).
//
// One call computes, for every expert e of the stack and rows r in [end[e] - count[e], end[e]),
//   d[r, n] = bf16(sum_k (a[r, k] sa[r, k / 128]) (w[e, n, k] sw[e, n / 128, k / 128]))
// accumulated in f32 and rounded once to bf16: a row's activations quantized per 128 columns
// (moe.cu's quantize kernels: s = max(amax, 1e-12) / 448, code = e4m3_rn(x / s), as
// linear_fp8_w8a8.cu), the weights as the checkpoint stores them; f32 accumulation, each 128-column
// block's partial scaled once (the K order is CUTLASS's, fixed for a shape). Rows no expert owns
// are left unwritten.
//   a:   [rows, K] e4m3 codes, packed, rows in expert order (moe.cu's slots)
//   sa:  f32 activation scales, expert e's block at end[e] - count[e] times K / 128 floats, laid
//        out [K / 128][count[e]] (row fastest: CUTLASS's MN-major SFA)
//   w:   [E, N, K] e4m3 codes, packed
//   sw:  f32 weight scales [E, K / 128, N / 128] (n-block fastest: MN-major SFB; the checkpoint's
//        [E, N / 128, K / 128] transposed per expert, transpose_fp8_scales)
//   d:   [rows, N] bf16, packed
//   count, end: [E] I32 on the device
// N and K multiples of 128. No host synchronisation: graph-capturable.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

struct WgmmaFp8GroupedGemm {
    const void* a = nullptr;
    const float* sa = nullptr;
    const void* w = nullptr;
    const float* sw = nullptr;
    __nv_bfloat16* d = nullptr;
    const int32_t* count = nullptr;
    const int32_t* end = nullptr;
    int64_t E = 0, N = 0, K = 0;
    // The operands swapped (D^T = W . A^T, 32-row tiles over an expert's rows): for decode
    // batches, where an expert owns a few rows (route table kernel wgmma_w8a8_swap).
    bool swapped = false;
};

// Whether this build has the kernel (CUTLASS's headers were found and sm_90a is built).
bool wgmma_fp8_grouped_built();
// Whether it runs here: built, ctx's device is sm_90 (not portable mode), N and K multiples of
// 128, 16-byte aligned a, w and d.
bool wgmma_fp8_grouped_fits(const ExecContext& ctx, const WgmmaFp8GroupedGemm& g);
// Raises Unsupported when it does not fit.
void wgmma_fp8_grouped_gemm(const ExecContext& ctx, const WgmmaFp8GroupedGemm& g);

} // namespace ninfer::ops::cuda
