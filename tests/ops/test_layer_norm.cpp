// ops/layer_norm.h: the CPU reference against hand-computed rows, the fast path against the
// reference (K not a multiple of 4, T = 1, strided rows, in place), argument checks.
#include <cmath>

#include "ops/layer_norm.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

TEST(LayerNorm, ReferenceMatchesHandComputedRow) {
    // x = [1, 2, 3, 4]: mean 2.5, biased variance 1.25.
    Tensor x = f32_tensor({1, 4}, {1, 2, 3, 4});
    Tensor w = f32_tensor({4}, {1, 2, 0.5f, -1}), b = f32_tensor({4}, {0, 1, -1, 0.5f});
    Tensor y = zeros({1, 4});
    ops::layer_norm(kRef, x, w, b, 0.0f, y);
    const double inv = 1.0 / std::sqrt(1.25);
    const double expect[4] = {-1.5 * inv, -0.5 * inv * 2 + 1, 0.5 * inv * 0.5 - 1,
                              -1.5 * inv + 0.5};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.ptr<float>()[i], expect[i], 1e-6) << i;
}

TEST(LayerNorm, EpsAndConstantRows) {
    // A constant row has zero variance: y = b exactly (the centred values are 0), for any w.
    Tensor x = f32_tensor({2, 3}, {7, 7, 7, -2, -2, -2});
    Tensor w = f32_tensor({3}, {3, -4, 5}), b = f32_tensor({3}, {0.25f, -1, 2});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor y = zeros({2, 3});
        ops::layer_norm(ctx, x, w, b, 1e-5f, y);
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < 3; ++i) EXPECT_EQ(y.ptr<float>()[r * 3 + i], b.ptr<float>()[i]);
    }
    // K = 1: every row is constant.
    Tensor x1 = f32_tensor({3, 1}, {1, -5, 9}), w1 = f32_tensor({1}, {2}),
           b1 = f32_tensor({1}, {-3});
    Tensor y1 = zeros({3, 1});
    ops::layer_norm(kRef, x1, w1, b1, 1e-6f, y1);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(y1.ptr<float>()[r], -3.0f);
    // eps enters under the root: x = [-1, 1], var 1, eps 3 -> (x - 0) / 2.
    Tensor x2 = f32_tensor({1, 2}, {-1, 1}), w2 = f32_tensor({2}, {1, 1}),
           b2 = f32_tensor({2}, {0, 0});
    Tensor y2 = zeros({1, 2});
    ops::layer_norm(kRef, x2, w2, b2, 3.0f, y2);
    EXPECT_NEAR(y2.ptr<float>()[0], -0.5, 1e-7);
    EXPECT_NEAR(y2.ptr<float>()[1], 0.5, 1e-7);
}

TEST(LayerNorm, FastMatchesReferenceAcrossShapes) {
    for (int64_t T : {1, 3, 17, 64}) {
        for (int64_t K : {1, 5, 7, 100, 1152, 1153}) {
            Tensor x = random_tensor({T, K}, 1, 3.0f);
            // An offset mean, as activations have: the centring must happen before the square.
            for (int64_t i = 0; i < x.numel(); ++i) x.ptr<float>()[i] += 4.0f;
            Tensor w = random_tensor({K}, 2, 1.0f), b = random_tensor({K}, 3, 0.5f);
            Tensor ref = zeros({T, K}), fast = zeros({T, K});
            ops::layer_norm(kRef, x, w, b, 1e-6f, ref);
            ops::layer_norm(kFast, x, w, b, 1e-6f, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "T=" << T << " K=" << K;
        }
    }
}

TEST(LayerNorm, StridedRowsAndInPlace) {
    const int64_t T = 6, K = 37;
    Tensor big = random_tensor({T, K + 11}, 4, 2.0f);
    const TensorView x = big.view().narrow(1, 3, K); // row stride K + 11
    Tensor w = random_tensor({K}, 5), b = random_tensor({K}, 6);
    Tensor ref = zeros({T, K}), fast = zeros({T, K});
    ops::layer_norm(kRef, x, w, b, 1e-6f, ref);
    ops::layer_norm(kFast, x, w, b, 1e-6f, fast);
    EXPECT_TRUE(near(fast, ref, kElementwiseF32));
    Tensor contiguous = clone(x), expect = zeros({T, K});
    ops::layer_norm(kRef, contiguous, w, b, 1e-6f, expect);
    EXPECT_TRUE(near(ref, expect, kExact)) << "the row stride changes nothing";
    for (const auto& ctx : {kRef, kFast}) {
        Tensor inplace = clone(x), separate = zeros({T, K});
        ops::layer_norm(ctx, inplace, w, b, 1e-6f, separate);
        ops::layer_norm(ctx, inplace, w, b, 1e-6f, inplace); // y may alias x
        EXPECT_TRUE(near(inplace, separate, kExact));
    }
}

TEST(LayerNorm, RejectsBadArguments) {
    Tensor x = random_tensor({2, 8}, 1), w = random_tensor({8}, 2), b = random_tensor({8}, 3);
    Tensor y = zeros({2, 8});
    Tensor w7 = random_tensor({7}, 2), y3 = zeros({3, 8}), y9 = zeros({2, 9});
    EXPECT_THROW(ops::layer_norm(kFast, x, w7, b, 1e-6f, y), Error);
    EXPECT_THROW(ops::layer_norm(kFast, x, w, w7, 1e-6f, y), Error);
    EXPECT_THROW(ops::layer_norm(kFast, x, w, b, 1e-6f, y3), Error);
    EXPECT_THROW(ops::layer_norm(kFast, x, w, b, 1e-6f, y9), Error);
    EXPECT_THROW(ops::layer_norm(kFast, x, w, b, -1.0f, y), Error);
    Tensor bf = zeros({8}, DType::BF16);
    EXPECT_THROW(ops::layer_norm(kFast, x, w, bf, 1e-6f, y), Error); // w and b differ in dtype
    EXPECT_NO_THROW(ops::layer_norm(kFast, x, w, b, 1e-6f, y));
}

} // namespace
} // namespace ninfer::test
