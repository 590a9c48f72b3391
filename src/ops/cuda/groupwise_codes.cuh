// Groupwise W8/Q4 codes (model/groupwise.h's layout) as floats, shared by the groupwise GEMV
// (linear_grouped.cu) and the fused MoE decode route (moe_decode_grouped.cuh).
//   w8: byte b holds q in two's complement.
//   q4: byte b holds element 2i in its low nibble and 2i + 1 in its high one, each q + 8.
// Two decodings, each where it measured faster (H100, bench/NOTES.md):
//   - word_codes_i2f: an integer-to-float conversion per code; the GEMV's (the 27B in q4 decoded
//     at 73.1 tok/s with it against 68.0 with the other);
//   - word_codes_prmt: the byte moved into the mantissa of 2^23 (one PRMT) and 2^23 + bias
//     subtracted (one FADD), no quarter-rate I2F: for 0 <= u < 2^23, as_float(0x4B000000 | u) is
//     exactly 2^23 + u, so the difference is the exact integer u - bias; the fused MoE decode
//     route's (the 35B-A3B in q4 decoded at 372 tok/s with it everywhere against 364 with I2F
//     everywhere, although its GEMVs lost).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

namespace ninfer::ops::cuda {

template <int BITS> constexpr int kCodesPerLoad = BITS == 8 ? 16 : 32; // codes in 16 bytes

// The codes of one 32-bit word (4 for w8, 8 for q4) as floats, in column order: I2F.
template <int BITS>
__device__ __forceinline__ void word_codes_i2f(uint32_t word, float (&v)[BITS == 8 ? 4 : 8]) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const uint32_t byte = (word >> (8 * b)) & 0xFFu; // little-endian: byte b
        if constexpr (BITS == 8) {
            v[b] = float(int8_t(uint8_t(byte)));
        } else {
            v[2 * b] = float(int(byte & 0xFu) - 8);
            v[2 * b + 1] = float(int(byte >> 4) - 8);
        }
    }
}

// Byte I of word as the float 2^23 + byte: PRMT builds 0x4B0000bb (selector nibbles, low first:
// byte I of word, then y's byte 0 (0x00) twice, then y's byte 1 (0x4B), y = 0x00004B00).
template <int I> __device__ __forceinline__ float byte_above_2p23(uint32_t word) {
    static_assert(I >= 0 && I < 4, "a byte of a 32-bit word");
    return __uint_as_float(__byte_perm(word, 0x4B00u, 0x5440u | I));
}

// word_codes_i2f's values through PRMT + FADD.
template <int BITS>
__device__ __forceinline__ void word_codes_prmt(uint32_t word, float (&v)[BITS == 8 ? 4 : 8]) {
    if constexpr (BITS == 8) {
        constexpr float kBias = 8388608.0f + 128.0f; // 2^23 + 128
        const uint32_t u = word ^ 0x80808080u;       // every byte q + 128
        v[0] = byte_above_2p23<0>(u) - kBias;
        v[1] = byte_above_2p23<1>(u) - kBias;
        v[2] = byte_above_2p23<2>(u) - kBias;
        v[3] = byte_above_2p23<3>(u) - kBias;
    } else {
        constexpr float kBias = 8388608.0f + 8.0f; // 2^23 + 8
        const uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;
        v[0] = byte_above_2p23<0>(lo) - kBias;
        v[1] = byte_above_2p23<0>(hi) - kBias;
        v[2] = byte_above_2p23<1>(lo) - kBias;
        v[3] = byte_above_2p23<1>(hi) - kBias;
        v[4] = byte_above_2p23<2>(lo) - kBias;
        v[5] = byte_above_2p23<2>(hi) - kBias;
        v[6] = byte_above_2p23<3>(lo) - kBias;
        v[7] = byte_above_2p23<3>(hi) - kBias;
    }
}

// A group's scale (F16 or F32) as a float.
__device__ __forceinline__ float scale_to_float(float v) {
    return v;
}
__device__ __forceinline__ float scale_to_float(__half v) {
    return __half2float(v);
}

// The codes of one 16-byte load as floats, in column order (word_codes_i2f).
template <int BITS>
__device__ __forceinline__ void codes_to_float(const uint4& raw, float (&v)[kCodesPerLoad<BITS>]) {
    constexpr int kPerWord = BITS == 8 ? 4 : 8;
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float w[kPerWord];
        word_codes_i2f<BITS>(words[i], w);
#pragma unroll
        for (int j = 0; j < kPerWord; ++j) v[kPerWord * i + j] = w[j];
    }
}

} // namespace ninfer::ops::cuda
