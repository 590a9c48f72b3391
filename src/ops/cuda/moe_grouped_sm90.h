// The grouped expert GEMM on sm_90's warpgroup MMA (wgmma) with TMA: CUTLASS's persistent,
// warp-specialized grouped GEMM (headers from PyPI's nvidia-cutlass, pinned in
// cmake/cutlass.cmake), compiled for sm_90a alone in moe_grouped_sm90.cu. moe_experts' grouped
// route (moe.cu) takes it for bf16 expert stacks where route table decision "moe_experts.bf16"
// gives it the pair count and wgmma_grouped_fits says yes; otherwise the mma.sync tile kernels of
// moe_grouped.h run.
//
// One call computes, for every expert e of the stack,
//   d[r, n] = bf16(sum_k a[r, k] * w[e, n, k])   for rows r in [end[e] - count[e], end[e])
// (f32 accumulation, one rounding to bf16; the K order is CUTLASS's, fixed for a shape, so a row's
// result does not depend on which other rows share its expert). Rows no expert owns are left
// unwritten.
//   a: [rows, K] bf16, packed, rows in expert order (moe.cu's slots)
//   w: [E, N, K] bf16, packed
//   d: [rows, N] bf16, packed
//   count, end: [E] I32 on the device (moe.cu's counts, and its slot cursors after assign_slots)
// No host synchronisation: the groups' shapes and pointers are written on the device, so the
// call is graph-capturable.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

struct WgmmaGroupedGemm {
    const void* a = nullptr;
    const void* w = nullptr;
    __nv_bfloat16* d = nullptr;
    const int32_t* count = nullptr;
    const int32_t* end = nullptr;
    int64_t E = 0, N = 0, K = 0;
};

// Whether this build has the kernel (CUTLASS's headers were found and sm_90a is built).
bool wgmma_grouped_built();
// Whether it runs here: built, ctx's device is sm_90 (an H100 or H200; not portable mode), and
// TMA's alignment holds: K % 8 == 0 (16-byte rows of a and w), N % 8 == 0 (of d), 16-byte
// aligned a, w and d.
bool wgmma_grouped_fits(const ExecContext& ctx, const WgmmaGroupedGemm& g);
// Raises Unsupported when it does not fit.
void wgmma_grouped_gemm(const ExecContext& ctx, const WgmmaGroupedGemm& g);

} // namespace ninfer::ops::cuda
