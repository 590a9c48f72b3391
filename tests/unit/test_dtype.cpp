// core/dtype.h: bf16/f16 <-> f32 conversions (round trips, nearest-even, subnormals, overflow).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

bool bf16_is_nan(uint16_t h) {
    return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0;
}
bool f16_is_nan(uint16_t h) {
    return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
}

// The value of an f16 bit pattern computed from the IEEE definition in double.
double f16_value(uint16_t h) {
    const int sign = (h & 0x8000u) ? -1 : 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    if (exponent == 0x1f)
        return mantissa ? std::numeric_limits<double>::quiet_NaN()
                        : sign * std::numeric_limits<double>::infinity();
    if (exponent == 0) return sign * std::ldexp(double(mantissa), -24);
    return sign * std::ldexp(double(1024 + mantissa), exponent - 25);
}

// Nearest-even rounding of a finite double onto the two neighbours lo < hi (patterns lo, lo + 1).
uint16_t pick_nearest_even(double a, double lo_value, double hi_value, uint16_t lo) {
    const double dlo = a - lo_value, dhi = hi_value - a;
    if (dlo < dhi) return lo;
    if (dhi < dlo) return uint16_t(lo + 1);
    return (lo & 1u) ? uint16_t(lo + 1) : lo;
}

// Oracle for float -> f16 by search over the (monotonic) positive f16 patterns.
uint16_t f16_oracle(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    const double a = std::fabs(double(f));
    if (std::isinf(a) || a >= 65520.0) return uint16_t(sign | 0x7c00u);
    uint16_t lo = 0, hi = 0x7bff; // largest pattern with value <= a
    while (lo < hi) {
        const uint16_t mid = uint16_t((lo + hi + 1) / 2);
        if (f16_value(mid) <= a)
            lo = mid;
        else
            hi = uint16_t(mid - 1);
    }
    if (lo == 0x7bff) return uint16_t(sign | 0x7bffu); // in [65504, 65520)
    return uint16_t(sign | pick_nearest_even(a, f16_value(lo), f16_value(uint16_t(lo + 1)), lo));
}

// Oracle for float -> bf16: truncation and its successor, nearest even in double.
uint16_t bf16_oracle(float f) {
    const uint32_t bits = float_to_bits(f);
    const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
    const uint16_t lo = uint16_t((bits & 0x7fffffffu) >> 16);
    if (lo == 0x7f80) return uint16_t(sign | lo); // infinity
    const double a = std::fabs(double(f));
    const double lo_value = double(bits_to_float(uint32_t(lo) << 16));
    // The successor of the largest finite bf16 is infinity; round with 2^128 as its value.
    const double hi_value =
        lo == 0x7f7f ? std::ldexp(1.0, 128) : double(bits_to_float(uint32_t(lo + 1) << 16));
    return uint16_t(sign | pick_nearest_even(a, lo_value, hi_value, lo));
}

TEST(Bf16, EveryPatternRoundTripsExactly) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const float f = bf16_to_float(uint16_t(h));
        ASSERT_EQ(float_to_bits(f), h << 16) << "widening of " << h;
        const uint16_t back = float_to_bf16(f);
        if (bf16_is_nan(uint16_t(h))) {
            ASSERT_TRUE(std::isnan(f)) << h;
            ASSERT_TRUE(bf16_is_nan(back)) << h << " -> " << back;
            ASSERT_EQ(back & 0x8000u, h & 0x8000u) << "NaN sign of " << h;
        } else {
            ASSERT_EQ(back, h);
        }
    }
}

TEST(Bf16, RoundsToNearestEvenOnTies) {
    EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80u); // 1 + 2^-8: tie, even below
    EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82u); // tie, even above
    EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808001u)), 0x3f81u); // just above the tie
    EXPECT_EQ(float_to_bf16(bits_to_float(0x3f807fffu)), 0x3f80u); // just below the tie
    EXPECT_EQ(float_to_bf16(bits_to_float(0x3fff8000u)), 0x4000u); // carry into the exponent
    EXPECT_EQ(float_to_bf16(bits_to_float(0xbf818000u)), 0xbf82u); // negative tie
    EXPECT_EQ(float_to_bf16(bits_to_float(0x00008000u)), 0x0000u); // subnormal tie to zero
    EXPECT_EQ(float_to_bf16(bits_to_float(0x00018000u)), 0x0002u); // subnormal tie, even above
}

TEST(Bf16, OverflowInfinityAndNan) {
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(float_to_bf16(inf), 0x7f80u);
    EXPECT_EQ(float_to_bf16(-inf), 0xff80u);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80u); // rounds past max
    EXPECT_EQ(float_to_bf16(bits_to_float(0x7f7f7fffu)), 0x7f7fu);        // stays finite
    EXPECT_EQ(float_to_bf16(-0.0f), 0x8000u);
    // A signalling NaN whose payload lies only in the low 16 bits must not become infinity.
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_to_float(0x7f800001u))));
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_to_float(0xff800001u))));
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Bf16, MatchesOracleOnRandomFloats) {
    std::mt19937 gen(1234);
    for (int i = 0; i < 1 << 20; ++i) {
        const uint32_t bits = gen();
        const float f = bits_to_float(bits);
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16(f), bf16_oracle(f)) << std::hex << "bits 0x" << bits;
    }
}

TEST(F16, EveryPatternDecodesToItsIeeeValue) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const float f = f16_to_float(uint16_t(h));
        const double expect = f16_value(uint16_t(h));
        if (std::isnan(expect)) {
            ASSERT_TRUE(std::isnan(f)) << h;
        } else {
            ASSERT_EQ(double(f), expect) << "pattern " << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << "sign of " << h;
        }
    }
}

TEST(F16, EveryPatternRoundTripsExactly) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const uint16_t back = float_to_f16(f16_to_float(uint16_t(h)));
        if (f16_is_nan(uint16_t(h))) {
            ASSERT_TRUE(f16_is_nan(back)) << h << " -> " << back;
            ASSERT_EQ(back & 0x8000u, h & 0x8000u) << "NaN sign of " << h;
        } else {
            ASSERT_EQ(back, h);
        }
    }
}

TEST(F16, RoundsToNearestEvenOnTies) {
    EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);     // tie, even below
    EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u); // tie, even above
    EXPECT_EQ(float_to_f16(bits_to_float(0x3f801001u)), 0x3c01u);       // just above the tie
    EXPECT_EQ(float_to_f16(bits_to_float(0x3f800fffu)), 0x3c00u);       // just below the tie
    EXPECT_EQ(float_to_f16(2.0f - std::ldexp(1.0f, -11)), 0x4000u);     // carry into exponent
    EXPECT_EQ(float_to_f16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02u);
}

TEST(F16, Subnormals) {
    const float tiny = std::ldexp(1.0f, -24); // smallest f16 subnormal
    EXPECT_EQ(float_to_f16(tiny), 0x0001u);
    EXPECT_EQ(float_to_f16(-tiny), 0x8001u);
    EXPECT_EQ(float_to_f16(1023 * tiny), 0x03ffu);            // largest subnormal
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400u);  // smallest normal
    EXPECT_EQ(float_to_f16(0.5f * tiny), 0x0000u);            // tie to even (zero)
    EXPECT_EQ(float_to_f16(1.5f * tiny), 0x0002u);            // tie to even (two)
    EXPECT_EQ(float_to_f16(2.5f * tiny), 0x0002u);            // tie to even (two)
    EXPECT_EQ(float_to_f16(0.5f * tiny * 1.0001f), 0x0001u);  // above the tie
    EXPECT_EQ(float_to_f16(1023.5f * tiny), 0x0400u);         // tie into the normals
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -30)), 0x0000u);  // underflow to +0
    EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -30)), 0x8000u); // underflow to -0
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000u);
    EXPECT_EQ(f16_to_float(0x0001u), tiny);
    EXPECT_EQ(f16_to_float(0x83ffu), -1023 * tiny);
}

TEST(F16, OverflowToInfinity) {
    EXPECT_EQ(float_to_f16(65504.0f), 0x7bffu);   // largest finite
    EXPECT_EQ(float_to_f16(65519.996f), 0x7bffu); // below the halfway point
    EXPECT_EQ(float_to_f16(65520.0f), 0x7c00u);   // tie rounds to even: infinity
    EXPECT_EQ(float_to_f16(1e10f), 0x7c00u);
    EXPECT_EQ(float_to_f16(-1e10f), 0xfc00u);
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::max()), 0x7c00u);
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00u);
    EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00u);
    EXPECT_TRUE(std::isinf(f16_to_float(0x7c00u)));
    EXPECT_TRUE(f16_is_nan(float_to_f16(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_TRUE(f16_is_nan(float_to_f16(bits_to_float(0x7f800001u)))); // low-payload NaN
}

TEST(F16, MatchesOracleOnRandomFloats) {
    std::mt19937 gen(99);
    std::uniform_int_distribution<uint32_t> exponent(90, 146); // around and beyond f16's range
    for (int i = 0; i < 1 << 18; ++i) {
        uint32_t bits = gen();
        if (i % 2) bits = (bits & 0x807fffffu) | (exponent(gen) << 23);
        const float f = bits_to_float(bits);
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_f16(f), f16_oracle(f)) << std::hex << "bits 0x" << bits;
    }
}

TEST(DType, ArrayConversionsMatchScalarOnes) {
    std::vector<float> src = {0.0f, -1.5f, 3.14159f, 65520.0f, 1e-7f, -2.5e38f};
    std::vector<uint16_t> half(src.size()), brain(src.size());
    convert_from_f32(src.data(), half.data(), DType::F16, int64_t(src.size()));
    convert_from_f32(src.data(), brain.data(), DType::BF16, int64_t(src.size()));
    std::vector<float> from_half(src.size()), from_brain(src.size());
    convert_to_f32(half.data(), DType::F16, from_half.data(), int64_t(src.size()));
    convert_to_f32(brain.data(), DType::BF16, from_brain.data(), int64_t(src.size()));
    for (size_t i = 0; i < src.size(); ++i) {
        EXPECT_EQ(half[i], float_to_f16(src[i])) << i;
        EXPECT_EQ(brain[i], float_to_bf16(src[i])) << i;
        EXPECT_EQ(float_to_bits(from_half[i]), float_to_bits(f16_to_float(half[i]))) << i;
        EXPECT_EQ(float_to_bits(from_brain[i]), float_to_bits(bf16_to_float(brain[i]))) << i;
    }
    std::vector<int32_t> ints(2);
    std::vector<float> out(2);
    EXPECT_TRUE(raises([&] { convert_to_f32(ints.data(), DType::I32, out.data(), 2); }, {"I32"}));
    EXPECT_TRUE(raises([&] { convert_from_f32(out.data(), ints.data(), DType::I32, 2); }, {"I32"}));
}

TEST(DType, SafetensorsNamesAndSizes) {
    const std::vector<std::pair<const char*, DType>> table = {
        {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64},
        {"I32", DType::I32}, {"I64", DType::I64}, {"U8", DType::U8}, {"F8_E4M3", DType::F8E4M3}};
    const std::vector<int64_t> sizes = {4, 2, 2, 8, 4, 8, 1, 1};
    for (size_t i = 0; i < table.size(); ++i) {
        DType d = DType::U8;
        ASSERT_TRUE(dtype_from_safetensors(table[i].first, &d)) << table[i].first;
        EXPECT_EQ(d, table[i].second);
        EXPECT_STREQ(dtype_name(d), table[i].first);
        EXPECT_EQ(dtype_size(d), sizes[i]) << table[i].first;
    }
    DType d = DType::F32;
    EXPECT_FALSE(dtype_from_safetensors("F8_E5M2", &d)); // no e5m2 weights
    EXPECT_FALSE(is_float(DType::F8E4M3)); // codes, never an activation dtype
    EXPECT_FALSE(dtype_from_safetensors("bf16", &d));
    EXPECT_FALSE(dtype_from_safetensors("", &d));
    EXPECT_TRUE(is_float(DType::BF16) && is_float(DType::F64));
    EXPECT_FALSE(is_float(DType::I32) || is_float(DType::U8) || is_float(DType::I64));
}

} // namespace
} // namespace ninfer::test
