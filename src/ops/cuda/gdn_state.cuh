// The GDN recurrent state's storage on CUDA (ops/gated_delta_rule.h): F32, or BF16 (vLLM's
// --mamba-ssm-cache-dtype bfloat16): half the bytes a decode step reads and writes per sequence.
// Every kernel that touches the state loads its elements to f32, runs all of a call's rows in f32
// and rounds once per store (round to nearest even), so a bf16 state differs from an f32 one only
// at the stores: the end of each call and each per-row snapshot. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ninfer::ops::cuda {

// A state tensor's base (an element index is relative to it) and element type. The type is a
// runtime flag, not a template parameter: the branch is uniform across the grid and costs nothing
// next to the memory access, and the kernels keep one instantiation each.
struct GdnStateRef {
    void* data;
    bool bf16;
    __device__ __forceinline__ float load(int64_t i) const {
        return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i])
                    : static_cast<const float*>(data)[i];
    }
    __device__ __forceinline__ void store(int64_t i, float v) const {
        if (bf16)
            static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
        else
            static_cast<float*>(data)[i] = v;
    }
    // The same storage from element `offset` on.
    __device__ __forceinline__ GdnStateRef at(int64_t offset) const {
        return {bf16 ? static_cast<void*>(static_cast<__nv_bfloat16*>(data) + offset)
                     : static_cast<void*>(static_cast<float*>(data) + offset),
                bf16};
    }
};

} // namespace ninfer::ops::cuda
