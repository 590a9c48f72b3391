// ops/rope.h: partial NeoX rotary embedding, Fast against Reference and against the formula.
#include <random>

#include "ops/op_test_util.h"
#include "ops/rope.h"

namespace ninfer::test {
namespace {

constexpr double kTheta = 10'000'000.0; // Qwen3.5 rope_theta

std::vector<int32_t> random_positions(int64_t T, int32_t max_pos, uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int32_t> dist(0, max_pos);
    std::vector<int32_t> pos(static_cast<size_t>(T), 0);
    for (auto& p : pos) p = dist(gen);
    return pos;
}

// The contract in FP64 on one head: inv_freq as an f32 value, the angle an f32 product.
void naive_rope(float* x, int32_t position, int64_t rotary_dim, double theta) {
    const int64_t half = rotary_dim / 2;
    std::vector<double> a(x, x + rotary_dim);
    for (int64_t i = 0; i < half; ++i) {
        const float inv_freq = float(1.0 / std::pow(theta, double(2 * i) / double(rotary_dim)));
        const double angle = double(float(position) * inv_freq);
        const double c = std::cos(angle), s = std::sin(angle);
        x[i] = float(a[size_t(i)] * c - a[size_t(i + half)] * s);
        x[i + half] = float(a[size_t(i + half)] * c + a[size_t(i)] * s);
    }
}

struct Dims {
    int64_t D, rotary;
};

TEST(Rope, FastMatchesReferenceAcrossShapes) {
    // Full rotary, and Qwen3.5's partial rotary (a quarter of head_dim 256).
    for (Dims d : {Dims{32, 32}, Dims{64, 64}, Dims{64, 16}, Dims{256, 64}, Dims{256, 256}}) {
        for (int64_t T : {1, 3, 17, 150}) {
            for (int64_t nH : {1, 4, 16}) {
                Tensor x = random_tensor({T, nH, d.D}, 71, 2.0f);
                Tensor pos = i32_tensor(random_positions(T, 40000, uint64_t(72 + T)));
                Tensor ref = clone(x), fast = clone(x);
                ops::rope(kRef, ref, pos, d.rotary, kTheta);
                ops::rope(kFast, fast, pos, d.rotary, kTheta);
                EXPECT_TRUE(near(fast, ref, kElementwiseF32))
                    << "D=" << d.D << " rotary=" << d.rotary << " T=" << T << " nH=" << nH;
            }
        }
    }
}

TEST(Rope, ReferenceMatchesNeoxPairsAndPassesTheTail) {
    const int64_t T = 6, nH = 3, D = 24, rotary = 8;
    Tensor x = random_tensor({T, nH, D}, 73, 1.5f);
    const std::vector<int32_t> pos_values{0, 1, 5, 77, 1000, 65535};
    Tensor pos = i32_tensor(pos_values);
    for (double theta : {10000.0, kTheta}) {
        Tensor y = clone(x), expect = clone(x);
        ops::rope(kRef, y, pos, rotary, theta);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nH; ++h)
                naive_rope(expect.ptr<float>() + (t * nH + h) * D, pos_values[size_t(t)], rotary,
                           theta);
        EXPECT_TRUE(near(y, expect, kElementwiseF32)) << "theta=" << theta;
        // Dims [rotary, D) pass through bit-exactly; position 0 is the identity.
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nH; ++h)
                for (int64_t i = (t == 0 ? 0 : rotary); i < D; ++i)
                    EXPECT_EQ(y.ptr<float>()[(t * nH + h) * D + i],
                              x.ptr<float>()[(t * nH + h) * D + i])
                        << "t=" << t << " h=" << h << " i=" << i;
    }
}

TEST(Rope, RotatesPairIWithIPlusHalf) {
    // A unit vector on dim i goes to (cos, sin) on dims (i, i + half): the NeoX layout, not the
    // interleaved (2i, 2i + 1) one. Position 3, theta 100, rotary 8: inv_freq_i = 100^(-i/4).
    const int64_t D = 10, rotary = 8, half = 4;
    for (const auto& ctx : {kRef, kFast}) {
        for (int64_t i = 0; i < half; ++i) {
            Tensor x = zeros({1, 1, D});
            x.ptr<float>()[i] = 1.0f;
            x.ptr<float>()[rotary] = 7.0f; // pass-through dim
            Tensor pos = i32_tensor({3});
            ops::rope(ctx, x, pos, rotary, 100.0);
            const double angle = 3.0 * std::pow(100.0, -double(i) / 4.0);
            for (int64_t j = 0; j < D; ++j) {
                double expect = 0;
                if (j == i) expect = std::cos(angle);
                if (j == i + half) expect = std::sin(angle);
                if (j == rotary) expect = 7.0;
                EXPECT_NEAR(x.ptr<float>()[j], expect, 1e-6) << "i=" << i << " j=" << j;
            }
        }
    }
}

TEST(Rope, PreservesPairNorms) {
    // A rotation of each pair (x_i, x_{i+half}) keeps its length.
    const int64_t T = 5, nH = 2, D = 64, rotary = 64, half = 32;
    Tensor x = random_tensor({T, nH, D}, 74);
    Tensor pos = i32_tensor({2, 9, 100, 4096, 30000});
    Tensor y = clone(x);
    ops::rope(kRef, y, pos, rotary, kTheta);
    for (int64_t r = 0; r < T * nH; ++r)
        for (int64_t i = 0; i < half; ++i) {
            const float* a = x.ptr<float>() + r * D;
            const float* b = y.ptr<float>() + r * D;
            EXPECT_NEAR(std::hypot(double(b[i]), double(b[i + half])),
                        std::hypot(double(a[i]), double(a[i + half])), 1e-5);
        }
}

TEST(Rope, StridedHeadsInsideAProjection) {
    // q heads inside a [T, nH * 2D] projection (query | gate per head), rotated in place.
    const int64_t T = 7, nH = 4, D = 32, rotary = 16;
    Tensor proj = random_tensor({T, nH * 2 * D}, 75);
    TensorView q = proj.view();
    q.ndim = 3;
    q.shape = {T, nH, D, 1};
    q.stride = {nH * 2 * D, 2 * D, 1, 0};
    Tensor pos = i32_tensor(random_positions(T, 500, 76));
    Tensor expect = clone(q);
    ops::rope(kRef, expect, pos, rotary, kTheta);
    Tensor before = clone(proj);
    ops::rope(kFast, q, pos, rotary, kTheta);
    EXPECT_TRUE(near(q, expect, kElementwiseF32));
    for (int64_t t = 0; t < T; ++t) // the gate halves are untouched
        for (int64_t h = 0; h < nH; ++h)
            for (int64_t i = D; i < 2 * D; ++i) {
                const int64_t at = t * nH * 2 * D + h * 2 * D + i;
                EXPECT_EQ(proj.ptr<float>()[at], before.ptr<float>()[at]);
            }
}

TEST(Rope, RejectsBadArguments) {
    Tensor x = random_tensor({3, 2, 16}, 77);
    Tensor pos = i32_tensor({0, 1, 2});
    EXPECT_NO_THROW(ops::rope(kFast, x, pos, 16, kTheta));
    EXPECT_THROW(ops::rope(kFast, x, pos, 7, kTheta), Error);  // odd
    EXPECT_THROW(ops::rope(kFast, x, pos, 18, kTheta), Error); // beyond head dim
    EXPECT_THROW(ops::rope(kFast, x, pos, 0, kTheta), Error);
    EXPECT_THROW(ops::rope(kFast, x, pos, 16, 0.0), Error);
    Tensor pos_short = i32_tensor({0, 1});
    EXPECT_THROW(ops::rope(kFast, x, pos_short, 16, kTheta), Error);
    Tensor pos_f32 = zeros({3});
    EXPECT_THROW(ops::rope(kFast, x, pos_f32, 16, kTheta), Error);
    Tensor x2d = random_tensor({3, 16}, 78);
    EXPECT_THROW(ops::rope(kFast, x2d, pos, 16, kTheta), Error);
}

} // namespace
} // namespace ninfer::test
