// The pieces of paged_attention's decode kernels (attention.cu: unquantized planes;
// attention_coded.cu: quantized ones) that do not depend on how a plane stores its values: the
// block's work (row, head group, key split), the queries in shared memory, the online softmax of
// one query head per warp, and where a head's result goes (the output, or split-K partials that
// attention.cu's combine kernel merges). Included by those two .cu files only.
#pragma once

#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::ops::cuda::decode_attn {

constexpr int kMaxDim = 256; // 32 lanes x 8 dims
// A warp per query head of the group: at decode a block holds one 32-key tile per split, so its
// time is the serial chain of one warp's work (ncu, H200, 35B shapes: with 4 warps of 2 heads each
// the kernel took 19 us for 4 MB, latency-bound at 6% occupancy).
constexpr int kWarps = 8;
constexpr int kMaxGroup = 8; // query heads per block (Qwen3.6: 8 for 35B-A3B, 6 for 27B)
static_assert(kMaxGroup % kWarps == 0);
// Key splits per (row, head group) at most (the combine kernel's bound). At 35B decode (2 kv heads)
// 2 x 128 blocks fill the SMs twice (H200, int8 planes: 128k context 275 -> 226 us against 64
// splits). A split holds at least kMinSplitKeys keys (one 32-key tile), so a short context uses
// fewer of the launched splits (2k: 64) and the rest exit at once: before this floor, 128 splits
// cost a 2k context 14.6 -> 18.8 us (the merge of twice the splits, each of half a tile).
constexpr int kMaxSplits = 128;
constexpr int kMinSplitKeys = 32;

// Keys per split for a row at position p: the p + 1 keys over ceil((p + 1) / kMinSplitKeys) of
// the `splits` launched, at most all of them, rounded up.
__device__ __forceinline__ int64_t keys_per_split(int64_t p, int splits) {
    const int64_t wanted = min(int64_t(splits), (p + kMinSplitKeys) / kMinSplitKeys);
    return (p + wanted) / wanted;
}
// The splits that hold keys, ceil((p + 1) / keys_per_split): the rounding can leave trailing
// splits empty (p + 1 = 9,001 over 128 splits: 71 keys each, 127 splits). The combine kernel
// reads exactly these.
__device__ __forceinline__ int splits_in_use(int64_t p, int splits) {
    const int64_t per_split = keys_per_split(p, splits);
    return int((p + per_split) / per_split);
}

struct PagedArgs {
    const int32_t *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size;
    int num_heads;                        // query heads (partials layout)
    int64_t cache_s0, cache_s1, cache_s2; // [NB, bs, nKV, D] strides (in rows for coded planes)
};

__device__ __forceinline__ int64_t cache_offset(const PagedArgs& a, int s, int64_t p, int kvh) {
    const int32_t block = a.block_table[int64_t(s) * a.block_table_stride + p / a.block_size];
    return block * a.cache_s0 + (p % a.block_size) * a.cache_s1 + kvh * a.cache_s2;
}

// A decode block's work: grid (row slot, head group, split). Row r at position p; a head group
// is up to kMaxGroup query heads [h0, h0 + G) sharing kv head kvh.
struct DecodeWork {
    int s, kvh, h0, G;
    int64_t r, p;
};

// False when the block's row slot is past its sequence's rows (the block has nothing to do).
__device__ __forceinline__ bool decode_work(const PagedArgs& a, int group, int max_rows,
                                            DecodeWork& w) {
    w.s = blockIdx.x / max_rows;
    const int i = blockIdx.x % max_rows;
    const int32_t r0 = a.row_begin[w.s];
    if (r0 + i >= a.row_begin[w.s + 1]) return false;
    w.r = r0 + i;
    w.p = a.pos_begin[w.s] + i;
    const int chunks = (group + kMaxGroup - 1) / kMaxGroup;
    w.kvh = blockIdx.y / chunks;
    w.h0 = w.kvh * group + (blockIdx.y % chunks) * kMaxGroup;
    w.G = min(kMaxGroup, w.kvh * group + group - w.h0);
    return true;
}

// This block's share of the keys [0, p]: [begin, end) of keys_per_split keys (empty for the splits
// past splits_in_use: the block then exits without writing). Computed after the queries'
// loads are issued (a 64-bit division).
struct KeyRange {
    int64_t begin, end;
    __device__ bool empty() const { return begin >= end; }
};
__device__ __forceinline__ KeyRange split_keys(const DecodeWork& w) {
    const int64_t per_split = keys_per_split(w.p, gridDim.z);
    const int64_t begin = blockIdx.z * per_split;
    return {begin, min(w.p + 1, begin + per_split)};
}

// The group's queries, scaled, as f32 rows of kMaxDim (zeros past D): all of a thread's loads
// are issued before its stores, so they overlap instead of queuing one after another.
template <typename T>
__device__ void stage_queries(const T* q, int64_t row, int64_t q_s1, int h0, int G, int D,
                              float scale, float (&sq)[kMaxGroup][kMaxDim]) {
    constexpr int kPerThread = kMaxGroup * kMaxDim / (32 * kWarps);
    float v[kPerThread];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
        const int e = threadIdx.x + i * 32 * kWarps, g = e / kMaxDim, d = e % kMaxDim;
        v[i] = g < G && d < D ? to_float(q[row + (h0 + g) * q_s1 + d]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
        const int e = threadIdx.x + i * 32 * kWarps;
        sq[e / kMaxDim][e % kMaxDim] = v[i] * scale;
    }
}

// Online-softmax state of one query head in one warp; lane l owns output dims [8l, 8l + 8).
struct HeadState {
    float max = -FLT_MAX, sum = 0.0f, acc[8] = {};
};

// Folds one tile's scores into st: lane j holds key j's score (keys j < n), the warp takes the
// tile's max and sum with two reductions and rescales acc. Returns lane j's weight p_j (0 past n),
// which the caller accumulates times key j's values.
__device__ __forceinline__ float softmax_update(float score, int n, HeadState& st) {
    const int lane = threadIdx.x & 31;
    const float new_max = fmaxf(st.max, warp_max(score));
    const float p = lane < n ? __expf(score - new_max) : 0.0f;
    const float correction = __expf(st.max - new_max);
    st.sum = st.sum * correction + warp_sum(p);
    st.max = new_max;
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[j] *= correction;
    return p;
}

// Head h's result of this block: (max, sum, unnormalised acc) into the partials for split-K
// (the combine kernel's input), else the normalised output row.
template <typename T>
__device__ void store_head(const PagedArgs& a, const HeadState& st, int h, int64_t r, int D,
                           float* partials, T* out, int64_t o_s0, int64_t o_s1) {
    const int lane = threadIdx.x & 31, d0 = lane * 8;
    if (partials) {
        const int split = blockIdx.z, splits = gridDim.z;
        float* part =
            partials + ((int64_t(blockIdx.x) * a.num_heads + h) * splits + split) * (D + 2);
        if (lane == 0) {
            part[0] = st.max;
            part[1] = st.sum;
        }
        for (int e = 0; e < 8; ++e)
            if (d0 + e < D) part[2 + d0 + e] = st.acc[e];
    } else {
        for (int e = 0; e < 8; ++e)
            if (d0 + e < D) out[r * o_s0 + h * o_s1 + d0 + e] = from_float<T>(st.acc[e] / st.sum);
    }
}

} // namespace ninfer::ops::cuda::decode_attn

namespace ninfer::ops::cuda {

// The decode kernel over quantized planes (attention_coded.cu) on grid (row slots, head groups,
// splits): `a` addresses the planes in rows (cache_s2 = 1); partials as attention_kernel's.
void launch_attention_coded(const ExecContext& ctx, dim3 grid, const decode_attn::PagedArgs& a,
                            const TensorView& q, const KvPlane& k_cache, const KvPlane& v_cache,
                            int group, float scale, const TensorView& out, int max_rows,
                            float* partials);

} // namespace ninfer::ops::cuda
