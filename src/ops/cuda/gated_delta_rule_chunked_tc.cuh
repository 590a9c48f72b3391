// The tensor-core (bf16 mma.sync) form of the chunked gated delta rule, shared by
// gated_delta_rule_chunked_prepare.cu, gated_delta_rule_chunked_scan.cu and the route's entry
// (gated_delta_rule_chunked_tc.cu). Included by .cu files only.
//
// For a chunk of n <= 64 rows with start state S0 [dk, dv], cumulative log decay G_t, raw bf16
// rows Kr, Qr, V, and kinv_t = rsqrt(|k_t|^2 + 1e-6), qinv_t = rsqrt(|q_t|^2 + 1e-6) / sqrt(dk):
//   M[t, j] = beta_t e^{G_t - G_j} kinv_t kinv_j Kr_t . Kr_j  (j < t)      T = (I + M)^-1
//   A[t, j] = e^{G_t - G_j} qinv_t kinv_j Qr_t . Kr_j          (j <= t)     Tb = T diag(beta)
//   U   = Tb (V - diag(e^G kinv) Kr S0)          (= U' - W S0 of the fp32 route, W folded in)
//   out = diag(e^G qinv) Qr S0 + A U
//   S   = e^{G_last} S0 + Kr^T diag(e^{G_last - G} kinv) U
// The prepare kernel (all chunks in parallel) writes Tb, A and the per-row scalars; the scan
// kernel (chunks in order) does the rest with S in registers.
//
// Precision: the tests hold the final state to f32 tolerances even for bf16 activations, so
// every product that feeds S is kept at f32 accuracy on bf16 tensor cores. Kr is exactly bf16, so
// Kr.Kr and Qr.Kr are exact in f32 accumulation; an f32 operand x multiplied by an exact bf16
// operand is split x = x0 + x1 + x2 into three bf16 terms (residual below 2^-24 |x|) and costs
// three mmas; f32 x f32 (Tb R) keeps the six cross terms of order >= 2^-16. The output only
// needs bf16 accuracy: A is stored in bf16, S0 and U enter it as two terms.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/gated_delta_rule_chunked.h"
#include "ops/cuda/gdn_state.cuh"
#include "ops/cuda/mma.cuh"

namespace ninfer::ops::cuda {

namespace gdn_tc {

constexpr int kChunk = 64; // rows per chunk (the fp32 route's chunk)
constexpr int kDk = 128;   // key dim as laid out in shared memory (dk <= 128 is zero-padded)
constexpr int kPad = 8;    // bf16 row padding: rows 16 bytes off the 128-byte bank period, so
                           // the eight row addresses of an ldmatrix hit distinct banks
constexpr int kKRow = kDk + kPad;    // smem row stride of K and Q tiles (elements)
constexpr int kTRow = kChunk + kPad; // smem row stride of 64-wide bf16 tiles (Tb, A, V)
constexpr int kPieces = 3;           // bf16 terms of a split f32 value

// Workspace written by the prepare kernel, per (row r, value head h); rows of a chunk are
// consecutive rows r0 + t, so chunk tiles are [t][...] slices of these.
struct TcWork {
    __nv_bfloat16* Tb; // [T, Hv, kPieces, kChunk]  row t of Tb, split into three bf16 terms
    __nv_bfloat16* A;  // [T, Hv, kChunk]           row t of A
    float4* scal; // [T, Hv]  {e^{G_t} kinv_t, e^{G_last - G_t} kinv_t, e^{G_t} qinv_t, e^{G_last}}
};

struct Rows {
    int64_t r0; // first row
    int n;      // rows (0 past the sequence's end)
};

// The rows of chunk c of sequence s.
__device__ __forceinline__ Rows chunk_rows(const GdnArgs& a, int s, int c) {
    const int64_t begin = a.row_begin[s] + int64_t(c) * kChunk, end = a.row_begin[s + 1];
    return {begin, begin < end ? int(end - begin < kChunk ? end - begin : kChunk) : 0};
}

// Splits the f32 pair (x0, x1) into bf16x2 terms p[0] + p[1] + p[2] (each the rounding of what
// the earlier terms left), so sum_i p[i] equals x to 2^-24 relative.
template <int N>
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t (&p)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const __nv_bfloat162 b = __floats2bfloat162_rn(x0, x1);
        p[i] = *reinterpret_cast<const uint32_t*>(&b);
        const float2 f = __bfloat1622float2(b);
        x0 -= f.x; // exact: f.x is x0 rounded
        x1 -= f.y;
    }
}

// An A fragment (16 x 16, mma.h) built from two 16x8 f32 accumulator tiles lo (k 0..7) and hi
// (k 8..15) of the same rows, split into N bf16 terms: frag[i] is term i.
template <int N>
__device__ __forceinline__ void a_from_acc(const float (&lo)[4], const float (&hi)[4],
                                           uint32_t (&frag)[N][4]) {
    uint32_t p[4][N];
    split_bf16x2<N>(lo[0], lo[1], p[0]);
    split_bf16x2<N>(lo[2], lo[3], p[1]);
    split_bf16x2<N>(hi[0], hi[1], p[2]);
    split_bf16x2<N>(hi[2], hi[3], p[3]);
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) frag[i][r] = p[r][i];
}

// Asynchronous 16-byte copies of `rows` x `segs` 16-byte segments: segment (t, sg) of the
// destination (row stride dst_row bf16 elements) from global src(t, sg), zero-filled when
// !valid(t, sg) (src is then not evaluated; `base`, a global address, stands in).
template <typename Src, typename Valid>
__device__ __forceinline__ void copy_tile(void* dst, int dst_row, int rows, int segs,
                                          const void* base, Src src, Valid valid) {
    __nv_bfloat16* d = static_cast<__nv_bfloat16*>(dst);
    for (int e = threadIdx.x; e < rows * segs; e += blockDim.x) {
        const int t = e / segs, sg = e % segs; // segs is a power of two
        const bool ok = valid(t, sg);
        cp_async_16(d + t * dst_row + sg * 8, ok ? src(t, sg) : base, ok);
    }
}

} // namespace gdn_tc

// Launchers (stream of ctx); both need a.dk % 8 == 0, a.dv % 8 == 0, dk, dv <= 128 and q, k, v
// rows 16-byte aligned (see gdn_tc_supported).
void gdn_tc_prepare(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w, int num_seqs,
                    int max_chunks);
void gdn_tc_scan(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w, int num_seqs,
                 int warps);
// The scan on the dk-split blocks (gated_delta_rule_chunked_scan_split.cu; gdn_tc_scan takes it
// for its 4-warp cases where gdn_tc_scan_split_dk says so). sabotage: its test's arm.
void gdn_tc_scan_split(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w,
                       int num_seqs, bool sabotage);
// Their dynamic shared memory per block (88 KB; the scan 160 KiB at 4 warps, 176 KiB at 8).
size_t gdn_tc_prepare_smem_bytes();
size_t gdn_tc_scan_smem_bytes(int warps);

// The f32 CUDA-core chunked route (gated_delta_rule_chunked.cu): F32 activations, and bf16
// shapes the tensor-core route does not take.
template <typename T>
void gated_delta_rule_chunked_fp32(const ExecContext& ctx, const GdnArgs& a, int num_seqs,
                                   int num_rows, int max_rows_per_seq);
// Whether ctx's device gives a block the shared memory of both f32 passes (114 KB and 138 KB at
// dk = dv = 128).
bool gated_delta_rule_chunked_fp32_fits(const ExecContext& ctx, const GdnArgs& a);

} // namespace ninfer::ops::cuda
