// Block-wide selection helpers for logit rows: ordered keys for (value desc, id asc), a block
// argmax over them, and the row splits of the two-stage (split, merge) row reductions. Included
// by logits.cu and sampling.cu.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/cuda/cuda_common.cuh"

namespace ninfer::ops::cuda {

// Maps a float to an unsigned key with the same order (negative values below positive).
__device__ __forceinline__ uint32_t order_key(float v) {
    const uint32_t bits = __float_as_uint(v);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// A 64-bit rank: larger means better; value first, then the lower id.
__device__ __forceinline__ uint64_t rank_of(float v, int64_t id) {
    return (uint64_t(order_key(v)) << 32) | uint64_t(0xffffffffu - uint32_t(id));
}
__device__ __forceinline__ int64_t rank_id(uint64_t rank) {
    return int64_t(0xffffffffu - uint32_t(rank & 0xffffffffu));
}

__device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const uint64_t other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = other > v ? other : v;
    }
    return v;
}

__device__ inline uint64_t block_max_u64(uint64_t v) {
    __shared__ uint64_t partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max_u64(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    return warp_max_u64(lane < warps ? partial[lane] : 0ull);
}

// Row splits: a row of n columns is cut into splits_for(n) chunks of split_chunk(n) columns; one
// block of kSplitThreads reduces each chunk to a partial, then one block per row (a thread per
// split) merges the partials. The split count depends on n only, so a row's result does not
// depend on how many rows share the call.
constexpr int kSplitThreads = 256;
// Why 1024: four columns per thread amortise a block's start and its partial; a 248,320-column
// vocabulary row then spreads over 243 blocks, about two per SM of an H200 (132 SMs).
constexpr int64_t kMinSplitColumns = 1024;
// Why 256: the merge block holds one partial per thread.
constexpr int kMaxSplits = 256;

inline int splits_for(int64_t n) {
    return int(std::clamp<int64_t>((n + kMinSplitColumns - 1) / kMinSplitColumns, 1, kMaxSplits));
}
inline int64_t split_chunk(int64_t n, int splits) {
    return (n + splits - 1) / splits;
}

} // namespace ninfer::ops::cuda
