// e4m3 codes as floats, shared by the fp8 kernels (linear_fp8.cu, moe_decode_fp8.cuh).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace ninfer::ops::cuda {

// Two e4m3 codes (the low byte first, as in memory) as floats: cvt.rn.f16x2.e4m3x2 (exact: every
// e4m3 value, subnormals and NaN included, is an f16 value), then f16 -> f32 (exact).
__device__ __forceinline__ void fp8x2_to_float(uint32_t pair, float& lo, float& hi) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    lo = f.x;
    hi = f.y;
}
// The 16 e4m3 codes of one 16-byte load as floats, in memory order.
__device__ __forceinline__ void fp8x16_to_float(const uint4& raw, float (&v)[16]) {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        fp8x2_to_float(words[j], v[4 * j], v[4 * j + 1]);
        fp8x2_to_float(words[j] >> 16, v[4 * j + 2], v[4 * j + 3]);
    }
}
__device__ __forceinline__ float fp8_to_float(uint8_t code) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

} // namespace ninfer::ops::cuda
