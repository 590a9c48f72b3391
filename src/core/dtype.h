// Element types and exact conversions between bf16/f16 bit patterns and float.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__CUDACC__)
#define NINFER_HD __host__ __device__
#else
#define NINFER_HD
#endif

namespace ninfer {

// F8E4M3: float8_e4m3fn codes (model/fp8.h), stored as bytes; never an activation dtype.
// I8: signed 8-bit codes (the int8 KV cache, ops/kv_cache.h).
enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, U8, F8E4M3, I8 };

int64_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses a safetensors dtype string ("F32", "BF16", ...); returns false when unknown.
bool dtype_from_safetensors(std::string_view name, DType* out);
inline bool is_float(DType d) {
    return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64;
}

NINFER_HD inline float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
NINFER_HD inline uint32_t float_to_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
}

NINFER_HD inline float bf16_to_float(uint16_t h) {
    return bits_to_float(uint32_t(h) << 16);
}

// Round to nearest even; NaN stays NaN (quiet), infinities are preserved.
NINFER_HD inline uint16_t float_to_bf16(float f) {
    uint32_t bits = float_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return uint16_t((bits + rounding) >> 16);
}

// IEEE binary16 -> float, exact (subnormals included).
NINFER_HD inline float f16_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0) return bits_to_float(sign);
        // Subnormal: value = mantissa * 2^-24.
        float value = float(mantissa) * 5.9604644775390625e-8f;
        return sign ? -value : value;
    }
    return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// float -> IEEE binary16, round to nearest even, overflow to infinity.
NINFER_HD inline uint16_t float_to_f16(float f) {
    uint32_t bits = float_to_bits(f);
    uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) return uint16_t(sign | 0x7e00u);
    if (abs_bits >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // rounds to >= 65520: inf
    if (abs_bits < 0x38800000u) {                                 // below 2^-14: subnormal
        float magnitude = bits_to_float(abs_bits);
        // Adding 0.5 (2^-1) aligns the binary point so the FPU rounds to the 2^-24 grid.
        uint32_t rounded = float_to_bits(magnitude + 0.5f) - 0x3f000000u;
        return uint16_t(sign | rounded);
    }
    uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
    abs_bits += 0xc8000fffu + mantissa_odd; // rebias exponent (-112 << 23) and round
    return uint16_t(sign | (abs_bits >> 13));
}

// float8_e4m3fn (F8E4M3): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
// S.1111.111 is NaN. Exact decoding; encoding rounds to the nearest value (ties to even),
// saturating at +-448 (NaN stays NaN).
float fp8_e4m3_to_float(uint8_t bits);
uint8_t float_to_fp8_e4m3(float x);

// Tensor bytes may sit at any address: safetensors data is read in place, and a header of odd
// length (legal) shifts every tensor after it. Typed reads and writes of such bytes go through
// memcpy, which compiles to a plain (unaligned-tolerant) load or store, never a misaligned access.
template <typename T> inline T load_unaligned(const void* data, int64_t i) {
    T value;
    std::memcpy(&value, static_cast<const unsigned char*>(data) + i * int64_t(sizeof(T)), sizeof(T));
    return value;
}
template <typename T> inline void store_unaligned(void* data, int64_t i, T value) {
    std::memcpy(static_cast<unsigned char*>(data) + i * int64_t(sizeof(T)), &value, sizeof(T));
}

// Reads element i of a float-typed buffer (at any alignment) as float.
inline float load_as_float(const void* data, DType dtype, int64_t i) {
    switch (dtype) {
    case DType::F32:
        return load_unaligned<float>(data, i);
    case DType::BF16:
        return bf16_to_float(load_unaligned<uint16_t>(data, i));
    case DType::F16:
        return f16_to_float(load_unaligned<uint16_t>(data, i));
    case DType::F64:
        return float(load_unaligned<double>(data, i));
    default:
        return 0.0f;
    }
}

// Converts n contiguous elements of a float dtype into float; src may have any alignment.
void convert_to_f32(const void* src, DType src_dtype, float* dst, int64_t n);
// Converts n floats into a float dtype (rounding to nearest even); dst may have any alignment.
void convert_from_f32(const float* src, void* dst, DType dst_dtype, int64_t n);

} // namespace ninfer
