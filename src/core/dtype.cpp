#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace ninfer {

int64_t dtype_size(DType dtype) {
    switch (dtype) {
    case DType::F32:
        return 4;
    case DType::F16:
        return 2;
    case DType::BF16:
        return 2;
    case DType::F64:
        return 8;
    case DType::I32:
        return 4;
    case DType::I64:
        return 8;
    case DType::U8:
    case DType::F8E4M3:
    case DType::I8:
        return 1;
    }
    return 0;
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
    case DType::F32:
        return "F32";
    case DType::F16:
        return "F16";
    case DType::BF16:
        return "BF16";
    case DType::F64:
        return "F64";
    case DType::I32:
        return "I32";
    case DType::I64:
        return "I64";
    case DType::U8:
        return "U8";
    case DType::F8E4M3:
        return "F8_E4M3";
    case DType::I8:
        return "I8";
    }
    return "?";
}

bool dtype_from_safetensors(std::string_view name, DType* out) {
    static constexpr struct {
        std::string_view name;
        DType dtype;
    } kTable[] = {{"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
                  {"F64", DType::F64}, {"I32", DType::I32}, {"I64", DType::I64},
                  {"U8", DType::U8},   {"F8_E4M3", DType::F8E4M3},
                  {"I8", DType::I8}};
    for (const auto& entry : kTable) {
        if (entry.name == name) {
            *out = entry.dtype;
            return true;
        }
    }
    return false;
}

// Both directions read and write the non-float side through load_/store_unaligned (dtype.h):
// the per-element memcpy is a plain load or store, and the loops still vectorise.
void convert_to_f32(const void* src, DType src_dtype, float* dst, int64_t n) {
    switch (src_dtype) {
    case DType::F32:
        if (n > 0) std::memcpy(dst, src, size_t(n) * 4); // empty tensors may have null data
        return;
    case DType::BF16:
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(load_unaligned<uint16_t>(src, i));
        return;
    case DType::F16:
        for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(load_unaligned<uint16_t>(src, i));
        return;
    case DType::F64:
        for (int64_t i = 0; i < n; ++i) dst[i] = float(load_unaligned<double>(src, i));
        return;
    default:
        fail_invalid("convert_to_f32: ", dtype_name(src_dtype), " is not a float dtype");
    }
}

void convert_from_f32(const float* src, void* dst, DType dst_dtype, int64_t n) {
    switch (dst_dtype) {
    case DType::F32:
        if (n > 0) std::memcpy(dst, src, size_t(n) * 4); // empty tensors may have null data
        return;
    case DType::BF16:
        for (int64_t i = 0; i < n; ++i) store_unaligned(dst, i, float_to_bf16(src[i]));
        return;
    case DType::F16:
        for (int64_t i = 0; i < n; ++i) store_unaligned(dst, i, float_to_f16(src[i]));
        return;
    case DType::F64:
        for (int64_t i = 0; i < n; ++i) store_unaligned(dst, i, double(src[i]));
        return;
    default:
        fail_invalid("convert_from_f32: ", dtype_name(dst_dtype), " is not a float dtype");
    }
}

float fp8_e4m3_to_float(uint8_t bits) {
    const int sign = bits >> 7, exp = (bits >> 3) & 0xf, man = bits & 0x7;
    if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
    const float v = exp == 0 ? std::ldexp(float(man), -9)            // man / 8 * 2^-6
                             : std::ldexp(float(man | 0x8), exp - 10); // (8 + man) / 8 * 2^(e-7)
    return sign ? -v : v;
}

uint8_t float_to_fp8_e4m3(float x) {
    // The positive codes 0x00..0x7e increase with their value: binary search, ties to the even
    // code (round to nearest even), saturating at 448.
    static const std::vector<float> values = [] {
        std::vector<float> v(0x7f);
        for (int c = 0; c < 0x7f; ++c) v[size_t(c)] = fp8_e4m3_to_float(uint8_t(c));
        return v;
    }();
    if (std::isnan(x)) return 0x7f;
    const uint8_t sign = std::signbit(x) ? 0x80 : 0;
    const float a = std::fabs(x);
    if (a >= values.back()) return uint8_t(sign | 0x7e);
    const auto hi = std::upper_bound(values.begin(), values.end(), a);
    const int upper = int(hi - values.begin()), lower = upper - 1; // values[lower] <= a < upper
    const float below = a - values[size_t(lower)], above = values[size_t(upper)] - a;
    const int code = below < above ? lower : above < below ? upper : (lower % 2 == 0 ? lower : upper);
    return uint8_t(sign | code);
}

} // namespace ninfer
