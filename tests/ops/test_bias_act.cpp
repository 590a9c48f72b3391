// ops/bias_act.h: gelu_pytorch_tanh, the erf GELU and the bias against hand-computed values, the
// fast path against the reference (N not a multiple of 4, T = 1, strided rows), argument checks.
#include <algorithm>
#include <cmath>

#include "ops/bias_act.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(BiasAct, GeluTanhMatchesFormula) {
    // The formula in float64 (Python's math): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
    Tensor y = f32_tensor({1, 6}, {0, 1, -1, 3, -3, 10});
    Tensor b = zeros({6});
    ops::bias_act(kRef, y, b, ops::Activation::GeluTanh);
    const double expect[6] = {
        0.0, 0.8411919906082768, -0.15880800939172324, 2.996362607918227, -0.0036373920817729943,
        10.0};
    for (int i = 0; i < 6; ++i)
        EXPECT_NEAR(y.ptr<float>()[i], expect[i], 1e-7 * std::max(1.0, std::abs(expect[i]))) << i;
}

TEST(BiasAct, GeluErfMatchesFormula) {
    // The formula in float64 (Python's math): 0.5 x (1 + erf(x / sqrt(2))), torch.nn.GELU().
    Tensor y = f32_tensor({1, 6}, {0, 1, -1, 3, -3, 10});
    Tensor b = zeros({6});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor g = clone(y);
        ops::bias_act(ctx, g, b, ops::Activation::GeluErf);
        const double expect[6] = {
            0.0, 0.8413447460685429, -0.15865525393145707, 2.99595030590511, -0.00404969409489031,
            10.0};
        for (int i = 0; i < 6; ++i)
            EXPECT_NEAR(g.ptr<float>()[i], expect[i], 3e-7 * std::max(1.0, std::abs(expect[i])))
                << i;
    }
}

TEST(BiasAct, BiasIsAddedBeforeTheActivation) {
    Tensor y = f32_tensor({2, 3}, {0.5f, -1, 2, 0, 0, 0});
    Tensor b = f32_tensor({3}, {0.25f, 1, -4});
    Tensor plain = clone(y);
    ops::bias_act(kRef, plain, b, ops::Activation::None);
    const float expect_plain[6] = {0.75f, 0, -2, 0.25f, 1, -4};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(plain.ptr<float>()[i], expect_plain[i]) << i;
    for (const auto& ctx : {kRef, kFast}) {
        Tensor g = clone(y);
        ops::bias_act(ctx, g, b, ops::Activation::GeluTanh);
        for (int i = 0; i < 6; ++i)
            EXPECT_NEAR(g.ptr<float>()[i], gelu_tanh(expect_plain[i]), 1e-6) << i;
    }
}

TEST(BiasAct, FastMatchesReferenceAcrossShapes) {
    for (int64_t T : {1, 5, 64}) {
        for (int64_t N : {1, 7, 100, 4304}) {
            for (auto act :
                 {ops::Activation::None, ops::Activation::GeluTanh, ops::Activation::GeluErf}) {
                Tensor y0 = random_tensor({T, N}, 7, 3.0f), b = random_tensor({N}, 8);
                Tensor ref = clone(y0), fast = clone(y0);
                ops::bias_act(kRef, ref, b, act);
                ops::bias_act(kFast, fast, b, act);
                EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "T=" << T << " N=" << N;
            }
        }
    }
}

TEST(BiasAct, StridedRows) {
    const int64_t T = 4, N = 9;
    Tensor big = random_tensor({T, N + 5}, 9, 2.0f), b = random_tensor({N}, 10);
    Tensor expect = clone(big.view().narrow(1, 2, N));
    ops::bias_act(kRef, expect, b, ops::Activation::GeluTanh);
    Tensor before = clone(big);
    ops::bias_act(kRef, big.view().narrow(1, 2, N), b, ops::Activation::GeluTanh);
    EXPECT_TRUE(near(big.view().narrow(1, 2, N), expect, kExact));
    EXPECT_TRUE(near(big.view().narrow(1, 0, 2), before.view().narrow(1, 0, 2), kExact));
    EXPECT_TRUE(near(big.view().narrow(1, N + 2, 3), before.view().narrow(1, N + 2, 3), kExact))
        << "columns outside the view are not written";
}

TEST(BiasAct, RejectsBadArguments) {
    Tensor y = random_tensor({2, 8}, 1), b7 = random_tensor({7}, 2);
    EXPECT_THROW(ops::bias_act(kFast, y, b7, ops::Activation::None), Error);
    Tensor y3 = random_tensor({2, 2, 8}, 3), b8 = random_tensor({8}, 4);
    EXPECT_THROW(ops::bias_act(kFast, y3, b8, ops::Activation::None), Error); // [T, N] only
    EXPECT_THROW(ops::bias_act(kFast, y, b8, ops::Activation(7)), Error);
}

} // namespace
} // namespace ninfer::test
