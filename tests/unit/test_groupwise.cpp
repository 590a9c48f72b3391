// Groupwise W8/Q4 weights (model/groupwise.h): codes and scales of hand-worked groups (the
// signed-max scale, half-to-even rounding, the clamp of the opposite extreme, nibble order, an
// odd row padded with code 0, a partial last group, an all-zero group), the error bound on random
// weights, and clear errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "model/groupwise.h"

namespace ninfer::model {
namespace {

io::TensorEntry entry(const std::string& name, DType dtype, std::vector<int64_t> shape,
                      const std::vector<uint8_t>& bytes) {
    io::TensorEntry e;
    e.name = name;
    e.dtype = dtype;
    e.dtype_known = true;
    e.dtype_name = dtype_name(dtype);
    e.shape = std::move(shape);
    e.data = bytes.data();
    e.nbytes = int64_t(bytes.size());
    return e;
}

std::vector<float> scales_of(const GroupwiseTensor& t) {
    std::vector<float> s(t.scale.size() / 2);
    convert_to_f32(t.scale.data(), DType::F16, s.data(), int64_t(s.size()));
    return s;
}

TEST(Groupwise, Q4CodesFollowTheRecipe) {
    // One row of 5 columns in groups of 4: [8, -2, 3, -8 | 1]. Group 0: m = 8 (the first of the
    // tied magnitudes), s = 8 / -8 = -1: codes -8, 2, -3, and -8 / -1 = 8 clamps to 7. Group 1:
    // m = 1, s = -1/8: code -8. Bytes: (-8+8) | (2+8) << 4, (-3+8) | (7+8) << 4, (-8+8) | 8 << 4.
    const float w[] = {8, -2, 3, -8, 1};
    const GroupwiseTensor t = quantize_groupwise(w, 1, 5, 4, 4, DType::F16, "w");
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0xA0, 0xF5, 0x80}));
    EXPECT_EQ(scales_of(t), (std::vector<float>{-1.0f, -0.125f}));
    const auto codes = entry("w", DType::U8, {1, 3}, t.codes);
    const auto scale = entry("w_scale", DType::F16, {1, 2}, t.scale);
    EXPECT_EQ(dequantize_groupwise(codes, scale, {1, 5}, 4, 4),
              (std::vector<float>{8, -2, 3, -7, 1}));
}

TEST(Groupwise, W8RoundsHalfToEvenAndKeepsZeroGroupsZero) {
    // Row 0 [-128, 0.5, 1.5, -2.5, 2.5, 0]: s = -128 / -128 = 1, codes -128, 0, 2, -2, 2, 0 (ties
    // to even). Row 1, all zero: s = 0, codes 0.
    std::vector<float> w = {-128, 0.5f, 1.5f, -2.5f, 2.5f, 0};
    w.resize(12, 0.0f);
    const GroupwiseTensor t = quantize_groupwise(w.data(), 2, 6, 8, 6, DType::F16, "w");
    EXPECT_EQ(scales_of(t), (std::vector<float>{1.0f, 0.0f}));
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0x80, 0, 2, 0xFE, 2, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Groupwise, ErrorStaysWithinHalfAScaleExceptTheClampedExtreme) {
    std::mt19937 gen(7);
    std::normal_distribution<float> d(0, 0.02f);
    const int64_t rows = 9, cols = 77; // odd columns, partial last group
    std::vector<float> w(size_t(rows * cols));
    for (float& v : w) v = d(gen);
    for (int bits : {4, 8})
        for (int64_t group : {32, 64}) {
            const GroupwiseTensor t =
                quantize_groupwise(w.data(), rows, cols, bits, group, DType::F16, "w");
            const auto codes = entry("w", groupwise_code_dtype(bits),
                                     groupwise_code_shape({rows, cols}, bits), t.codes);
            const auto scale =
                entry("w_scale", DType::F16, groupwise_scale_shape({rows, cols}, group), t.scale);
            const std::vector<float> back =
                dequantize_groupwise(codes, scale, {rows, cols}, bits, group);
            const std::vector<float> s = scales_of(t);
            const int64_t groups = (cols + group - 1) / group;
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) {
                    const float sc = std::fabs(s[size_t(i * groups + j / group)]);
                    // The f16 scale is within 2^-11 of m / 2^(bits-1), so even the clamped
                    // opposite extreme lands within one scale; the rest within half of one.
                    ASSERT_LE(std::fabs(back[size_t(i * cols + j)] - w[size_t(i * cols + j)]),
                              sc * 1.0001f)
                        << bits << " bits, group " << group << " [" << i << ", " << j << "]";
                }
        }
}

TEST(Groupwise, BadInputIsAClearError) {
    const float inf[] = {1, INFINITY};
    try {
        quantize_groupwise(inf, 1, 2, 4, 2, DType::F16, "model.x.weight");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'model.x.weight' holds a non-finite value"),
                  std::string::npos);
    }
    // A tensor large enough to be split over threads: the first bad row in row order is named,
    // and no worker thread takes the process down.
    std::vector<float> big(size_t(3000) * 1024, 0.5f);
    big[size_t(2500) * 1024 + 7] = NAN;
    big[size_t(100) * 1024 + 3] = INFINITY;
    try {
        quantize_groupwise(big.data(), 3000, 1024, 4, 32, DType::F16, "big");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at [100, 3]"), std::string::npos) << e.what();
    }
    const float huge[] = {1e6f}; // 1e6 / 8 overflows f16
    EXPECT_THROW(quantize_groupwise(huge, 1, 1, 4, 1, DType::F16, "w"), Error);
    const std::vector<uint8_t> bytes(8, 0x88), two(4, 0);
    auto expect_error = [&](const io::TensorEntry& c, const io::TensorEntry& s, const char* text) {
        try {
            dequantize_groupwise(c, s, {2, 8}, 4, 4);
            FAIL() << text;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
        }
    };
    const auto scale = entry("w_scale", DType::F16, {2, 2}, std::vector<uint8_t>(8, 0));
    expect_error(entry("w", DType::I8, {2, 4}, bytes), scale, "expected U8 [2, 4]");
    expect_error(entry("w", DType::U8, {2, 8}, bytes), scale, "expected U8 [2, 4]");
    expect_error(entry("w", DType::U8, {2, 4}, bytes), entry("w_scale", DType::F16, {2, 1}, two),
                 "groupwise scale 'w_scale' has shape [2, 1], expected [2, 2]");
    expect_error(entry("w", DType::U8, {2, 4}, bytes), entry("w_scale", DType::I8, {2, 2}, two),
                 "has dtype I8");
    const std::vector<uint8_t> nan_scale = {0, 0x7e, 0, 0, 0, 0, 0, 0}; // f16 NaN first
    expect_error(entry("w", DType::U8, {2, 4}, bytes),
                 entry("w_scale", DType::F16, {2, 2}, nan_scale), "non-finite");
}

} // namespace
} // namespace ninfer::model
