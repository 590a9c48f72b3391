// ops/rope_table.h: the rotation by hand, partial rotary dims, the fast path against the
// reference on strided views of a fused qkv projection, agreement with ops::rope when the tables
// hold rope's angles, argument checks.
#include <cmath>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/rope.h"
#include "ops/rope_table.h"

namespace ninfer::test {
namespace {

TEST(RopeTable, RotatesHalvesByHand) {
    // One row, one head, D = 6, rotary_dim 4 (half 2): dims 4 and 5 pass through.
    Tensor x = f32_tensor({1, 1, 6}, {1, 2, 3, 4, 5, 6});
    const float a0 = 0.3f, a1 = -1.1f;
    Tensor c = f32_tensor({1, 2}, {std::cos(a0), std::cos(a1)});
    Tensor s = f32_tensor({1, 2}, {std::sin(a0), std::sin(a1)});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor y = clone(x);
        ops::rope_table(ctx, y, c, s, 4);
        const float* c_ = c.ptr<float>();
        const float* s_ = s.ptr<float>();
        const double expect[6] = {1.0 * c_[0] - 3.0 * s_[0],
                                  2.0 * c_[1] - 4.0 * s_[1],
                                  3.0 * c_[0] + 1.0 * s_[0],
                                  4.0 * c_[1] + 2.0 * s_[1],
                                  5,
                                  6};
        for (int i = 0; i < 6; ++i) EXPECT_NEAR(y.ptr<float>()[i], expect[i], 1e-6) << i;
        EXPECT_EQ(y.ptr<float>()[4], 5.0f);
        EXPECT_EQ(y.ptr<float>()[5], 6.0f);
    }
}

// [T, 3, nH, D] fused projection and the cos / sin tables of random angles.
struct Fused {
    Tensor qkv, cos, sin;
    Fused(int64_t T, int64_t nH, int64_t D, int64_t half, uint64_t seed)
        : qkv(random_tensor({T, 3 * nH * D}, seed, 2.0f)), cos(zeros({T, half})),
          sin(zeros({T, half})) {
        Tensor angle = random_tensor({T, half}, seed + 1, 3.0f);
        for (int64_t i = 0; i < T * half; ++i) {
            cos.ptr<float>()[i] = std::cos(angle.ptr<float>()[i]);
            sin.ptr<float>()[i] = std::sin(angle.ptr<float>()[i]);
        }
    }
};

TEST(RopeTable, FastMatchesReferenceOnFusedViews) {
    struct Case {
        int64_t T, nH, D, rotary;
    };
    for (Case tc : {Case{1, 16, 72, 72}, {9, 16, 72, 72}, {33, 2, 16, 8}, {5, 3, 10, 6}}) {
        Fused f(tc.T, tc.nH, tc.D, tc.rotary / 2, 11);
        Fused g(tc.T, tc.nH, tc.D, tc.rotary / 2, 11);
        for (int part = 0; part < 2; ++part) { // the q and the k block of each row
            ops::rope_table(kRef, f.qkv.view().split_heads(part * tc.nH * tc.D, tc.nH, tc.D), f.cos,
                            f.sin, tc.rotary);
            ops::rope_table(kFast, g.qkv.view().split_heads(part * tc.nH * tc.D, tc.nH, tc.D),
                            g.cos, g.sin, tc.rotary);
        }
        EXPECT_TRUE(near(g.qkv, f.qkv, kElementwiseF32)) << "T=" << tc.T << " D=" << tc.D;
        Fused untouched(tc.T, tc.nH, tc.D, tc.rotary / 2, 11);
        const int64_t vcol = 2 * tc.nH * tc.D;
        EXPECT_TRUE(near(f.qkv.view().narrow(1, vcol, tc.nH * tc.D),
                         untouched.qkv.view().narrow(1, vcol, tc.nH * tc.D), kExact))
            << "the v block is not written";
    }
}

TEST(RopeTable, EqualsRopeWithItsAngles) {
    // Tables holding rope's angles (f32(position) * inv_freq, cos/sin rounded to f32) give rope.
    const int64_t T = 12, nH = 4, D = 32, rotary = 16, half = rotary / 2;
    const double theta = 10000.0;
    Tensor x = random_tensor({T, nH, D}, 12, 1.5f);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = int32_t(3 * t + 1);
    Tensor c = zeros({T, half}), s = zeros({T, half});
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < half; ++j) {
            const float inv_freq = float(1.0 / std::pow(theta, double(2 * j) / double(rotary)));
            const float angle = float(pos[t]) * inv_freq;
            c.ptr<float>()[t * half + j] = float(std::cos(double(angle)));
            s.ptr<float>()[t * half + j] = float(std::sin(double(angle)));
        }
    Tensor expect = clone(x), got = clone(x);
    ops::rope(kRef, expect, i32_tensor(pos), rotary, theta);
    ops::rope_table(kRef, got, c, s, rotary);
    EXPECT_TRUE(near(got, expect, kElementwiseF32));
}

TEST(RopeTable, RejectsBadArguments) {
    Tensor x = random_tensor({4, 2, 8}, 1), c = zeros({4, 4}), s = zeros({4, 4});
    EXPECT_THROW(ops::rope_table(kFast, x, c, s, 7), Error);  // odd
    EXPECT_THROW(ops::rope_table(kFast, x, c, s, 10), Error); // past D
    EXPECT_THROW(ops::rope_table(kFast, x, c, s, 4), Error);  // tables are [T, 4], half is 2
    Tensor c3 = zeros({3, 4});
    EXPECT_THROW(ops::rope_table(kFast, x, c3, s, 8), Error);
    Tensor x2 = random_tensor({4, 16}, 2);
    EXPECT_THROW(ops::rope_table(kFast, x2, c, s, 8), Error); // [T, nH, D] only
    EXPECT_NO_THROW(ops::rope_table(kFast, x, c, s, 8));
}

} // namespace
} // namespace ninfer::test
