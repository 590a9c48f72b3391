// Block-wide selection helpers for logit rows: ordered keys for (value desc, id asc) and a
// block argmax over them. Included by logits.cu and sampling.cu.
#pragma once

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

} // namespace ninfer::ops::cuda
