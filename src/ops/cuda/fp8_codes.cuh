// e4m3 codes as floats, and floats as e4m3 codes, shared by the fp8 kernels (linear_fp8.cu,
// moe_decode_fp8.cuh, the W8A8 routes: linear_fp8_w8a8.cu, moe_w8a8.cu).
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

// The W8A8 activation quantization of one 128-column group held by a warp, 4 values a lane
// (columns [4 lane, 4 lane + 4)): s = max(amax, kW8a8MinAmax) / 448 over the group (IEEE
// division), code = e4m3_rn(v / s), saturating, so |code| <= 448 and v ~ code * s. Returns the
// lane's 4 codes packed (the first in the low byte); *scale gets s on every lane.
inline constexpr float kE4m3Max = 448.0f;    // the largest finite e4m3 value
inline constexpr float kW8a8MinAmax = 1e-12f; // an all-zero group keeps a finite, nonzero scale
__device__ __forceinline__ uint32_t quantize_group4_e4m3(const float (&v)[4], float* scale) {
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = __fdiv_rn(fmaxf(amax, kW8a8MinAmax), kE4m3Max);
    uint32_t packed = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        packed |= uint32_t(__nv_cvt_float_to_fp8(__fdiv_rn(v[j], s), __NV_SATFINITE, __NV_E4M3))
                  << (8 * j);
    *scale = s;
    return packed;
}

} // namespace ninfer::ops::cuda
