// The input rows of the few-row GEMVs (linear_gemv.cu's bf16 GEMV, linear_fp8.cu's fp8 GEMV) as
// the dot products read them: x itself through L1 (PlainInput), or rms_norm(x) (NormedInput),
// which each block computes once into shared memory so that the dot products read it once, as
// they read x (normalising inside every dot product tripled the L1 traffic and cost 5% of the
// 27B's decode). The kernels taking an Input run kBlockWarps warps a block, call prepare() after
// their dependency wait (all threads: it synchronises) and store_input() after it, then read
// 8 activations at a time with load8(r, c) (c a multiple of 8). The bf16 weight-row loop both
// GEMVs run (dot8_rows, dot_rest_pipelined) is here too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/cuda_common.cuh"

namespace ninfer::ops::cuda::gemv {

constexpr int kBlockWarps = 8; // warps per block of every kernel taking an Input
constexpr int kInputElems = 8; // bf16 activations per 16-byte load

// The normalised rows are staged in dynamic shared memory up to the 48 KB a block may use without
// opting in (static and dynamic together), less 1 KB for the static shared memory beside them
// (the norm's partial sums: at most 8 rows x 8 warps x 4 bytes). Hidden sizes are 2048-8192: one
// row takes 4-16 KB, so K = 2048 stages 8 rows and K = 5120 four.
constexpr size_t kMaxStagedBytes = 47 * 1024;

// Sums each of v[0..R) over the block (kBlockWarps warps); every thread gets the R totals.
// One call per kernel: a second would race with the first's reads of `partial`.
template <int R> __device__ __forceinline__ void block_sum_each(float (&v)[R]) {
    __shared__ float partial[R][kBlockWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = warp_sum(v[r]);
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; ++r) partial[r][warp] = v[r];
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = warp_sum(lane < kBlockWarps ? partial[r][lane] : 0.0f);
}

// x itself, R rows read through the read-only cache.
template <int R> struct PlainInput {
    static constexpr int kRows = R;
    const __nv_bfloat16* x;
    int64_t stride; // elements between rows of x; a multiple of 8 (16-byte aligned rows)
    static size_t smem_bytes(int64_t) { return 0; }
    __device__ void prepare(int64_t) {}
    __device__ __forceinline__ void load8(int r, int64_t c, float (&v)[8]) const {
        bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + r * stride + c)), v);
    }
};

// h = rms_norm(x, norm_w, eps) with rms_norm_rows's rounding: h = bf16(x * scale * (1 + w)),
// staged in the block's dynamic shared memory ([R, K] bf16).
template <int R> struct NormedInput {
    static constexpr int kRows = R;
    const __nv_bfloat16* x;
    int64_t stride; // elements between rows of x; a multiple of 8 (16-byte aligned rows)
    const __nv_bfloat16* norm_w;
    float eps;
    int64_t K; // row length, also the pitch of the staged rows
    static size_t smem_bytes(int64_t k) { return size_t(R) * size_t(k) * sizeof(__nv_bfloat16); }
    __device__ __nv_bfloat16* staged() const {
        extern __shared__ __align__(16) __nv_bfloat16 gemv_smem[];
        return gemv_smem;
    }
    __device__ __forceinline__ uint4 x8(int r, int64_t c) const {
        return __ldg(reinterpret_cast<const uint4*>(x + r * stride + c));
    }
    // All threads of the block call it (it synchronises). The R rows' sums of squares are
    // reduced together, so R rows cost one block reduction, not R.
    __device__ void prepare(int64_t) {
        const int64_t first = int64_t(threadIdx.x) * kInputElems;
        const int64_t step = int64_t(blockDim.x) * kInputElems;
        float scale[R] = {};
        for (int64_t c = first; c < K; c += step)
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float v[8];
                bf16x8_to_float(x8(r, c), v);
#pragma unroll
                for (int j = 0; j < 8; ++j) scale[r] += v[j] * v[j];
            }
        block_sum_each(scale);
#pragma unroll
        for (int r = 0; r < R; ++r) scale[r] = rsqrtf(scale[r] / float(K) + eps);
        for (int64_t c = first; c < K; c += step) {
            float w[8];
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(norm_w + c)), w);
#pragma unroll
            for (int r = 0; r < R; ++r) stage8(r, c, scale[r], w);
        }
        __syncthreads();
    }
    // staged[r, c .. c+8) = bf16(x[r, c .. c+8) * scale * (1 + w)).
    __device__ __forceinline__ void stage8(int r, int64_t c, float scale, const float (&w)[8]) {
        float v[8];
        bf16x8_to_float(x8(r, c), v);
        __nv_bfloat162 packed[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            packed[j] = __floats2bfloat162_rn(v[2 * j] * scale * (1.0f + w[2 * j]),
                                              v[2 * j + 1] * scale * (1.0f + w[2 * j + 1]));
        *reinterpret_cast<uint4*>(staged() + r * K + c) = *reinterpret_cast<const uint4*>(packed);
    }
    __device__ __forceinline__ void load8(int r, int64_t c, float (&v)[8]) const {
        bf16x8_to_float(*reinterpret_cast<const uint4*>(staged() + r * K + c), v);
    }
};

// Block 0 stores the normalised rows (for the norm's other consumers); others only use them.
template <int R>
__device__ void store_input(const NormedInput<R>& in, int64_t K, __nv_bfloat16* h_out,
                            int64_t h_stride) {
    if (blockIdx.x != 0 || !h_out) return;
    const __nv_bfloat16* h = in.staged();
    for (int r = 0; r < R; ++r)
        for (int64_t c = int64_t(threadIdx.x) * kInputElems; c < K;
             c += int64_t(blockDim.x) * kInputElems)
            *reinterpret_cast<uint4*>(h_out + r * h_stride + c) =
                *reinterpret_cast<const uint4*>(h + r * K + c);
}
template <int R>
__device__ void store_input(const PlainInput<R>&, int64_t, __nv_bfloat16*, int64_t) {}

// A bf16 weight row against the input rows: each lane reads 16 bytes (8 weights) a load,
// kBf16Unroll loads in flight, so a warp covers kBf16Step columns of K a load.
constexpr int kBf16Unroll = 4;
constexpr int kBf16Step = 32 * kInputElems;

// acc[r] += in[r, c .. c+8) . w8 for every row r, the weight bytes w8 converted once.
template <typename Input>
__device__ __forceinline__ void dot8_rows(const Input& in, int64_t c, const uint4& w8,
                                          float (&acc)[Input::kRows]) {
    float wv[8];
    bf16x8_to_float(w8, wv);
#pragma unroll
    for (int r = 0; r < Input::kRows; ++r) {
        float xv[8];
        in.load8(r, c, xv);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += xv[j] * wv[j];
        acc[r] += sum;
    }
}

// The lane's chunks of `row` from c to K, software-pipelined: the next kBf16Unroll chunks are
// loaded before the current ones are consumed. With R rows of x to load and multiply per chunk,
// ptxas otherwise sinks each weight load to just before its use, which leaves one load per warp
// in flight. cur: the chunks at c .. c + kBf16Unroll * kBf16Step (zero past K).
template <typename Input>
__device__ __forceinline__ void dot_rest_pipelined(const Input& in, const __nv_bfloat16* row,
                                                   int64_t c, int64_t K,
                                                   uint4 (&cur)[kBf16Unroll],
                                                   float (&acc)[Input::kRows]) {
    for (; c < K; c += kBf16Unroll * kBf16Step) {
        uint4 next[kBf16Unroll];
#pragma unroll
        for (int u = 0; u < kBf16Unroll; ++u) {
            const int64_t cn = c + (kBf16Unroll + u) * kBf16Step;
            next[u] = cn < K ? __ldcs(reinterpret_cast<const uint4*>(row + cn)) : uint4{};
        }
#pragma unroll
        for (int u = 0; u < kBf16Unroll; ++u)
            if (c + u * kBf16Step < K) dot8_rows(in, c + u * kBf16Step, cur[u], acc);
#pragma unroll
        for (int u = 0; u < kBf16Unroll; ++u) cur[u] = next[u];
    }
}

} // namespace ninfer::ops::cuda::gemv
