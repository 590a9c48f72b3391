// ops/elementwise.h: add, sigmoid_mul, silu_mul; Fast against Reference, formulas by hand.
#include "ops/elementwise.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

TEST(Elementwise, FastMatchesReferenceAcrossShapes) {
    for (int64_t R : {1, 3, 17, 64, 150}) {
        for (int64_t N : {8, 100, 2048}) {
            Tensor a = random_tensor({R, N}, 31, 3.0f), b = random_tensor({R, N}, 32, 3.0f);
            Tensor gu = random_tensor({R, 2 * N}, 33, 4.0f);
            Tensor ref = zeros({R, N}), fast = zeros({R, N});
            ops::add(kRef, a, b, ref);
            ops::add(kFast, a, b, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "add R=" << R << " N=" << N;
            ops::sigmoid_mul(kRef, a, b, ref);
            ops::sigmoid_mul(kFast, a, b, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "sigmoid_mul R=" << R << " N=" << N;
            ops::silu_mul(kRef, gu, ref);
            ops::silu_mul(kFast, gu, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "silu_mul R=" << R << " N=" << N;
        }
    }
}

TEST(Elementwise, ReferenceMatchesFormulas) {
    const int64_t R = 3, N = 5;
    Tensor a = random_tensor({R, N}, 34, 5.0f), b = random_tensor({R, N}, 35, 5.0f);
    Tensor gu = random_tensor({R, 2 * N}, 36, 5.0f);
    Tensor sum = zeros({R, N}), gated = zeros({R, N}), swiglu = zeros({R, N});
    ops::add(kRef, a, b, sum);
    ops::sigmoid_mul(kRef, a, b, gated);
    ops::silu_mul(kRef, gu, swiglu);
    Tensor e_sum = zeros({R, N}), e_gated = zeros({R, N}), e_swiglu = zeros({R, N});
    for (int64_t r = 0; r < R; ++r) {
        for (int64_t i = 0; i < N; ++i) {
            const double x = a.ptr<float>()[r * N + i], y = b.ptr<float>()[r * N + i];
            e_sum.ptr<float>()[r * N + i] = float(x + y);
            e_gated.ptr<float>()[r * N + i] = float(x * sigmoid(y));
            // First half of the row is the gate, second half the up projection.
            const double g = gu.ptr<float>()[r * 2 * N + i], u = gu.ptr<float>()[r * 2 * N + N + i];
            e_swiglu.ptr<float>()[r * N + i] = float(g * sigmoid(g) * u);
        }
    }
    EXPECT_TRUE(near(sum, e_sum, kExact));
    EXPECT_TRUE(near(gated, e_gated, kElementwiseF32));
    EXPECT_TRUE(near(swiglu, e_swiglu, kElementwiseF32));
}

TEST(Elementwise, HandValuesAndSaturation) {
    Tensor x = f32_tensor({1, 4}, {2.0f, -3.0f, 7.0f, 1.0f});
    Tensor gate = f32_tensor({1, 4}, {0.0f, 200.0f, -200.0f, std::log(3.0f)});
    Tensor gu = f32_tensor({1, 6}, {0.0f, -200.0f, 1.0f, 5.0f, 2.0f, 3.0f});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = zeros({1, 4});
        ops::sigmoid_mul(ctx, x, gate, out);
        EXPECT_FLOAT_EQ(out.ptr<float>()[0], 1.0f);  // 2 * sigmoid(0)
        EXPECT_FLOAT_EQ(out.ptr<float>()[1], -3.0f); // saturates without overflow
        EXPECT_EQ(out.ptr<float>()[2], 0.0f);
        EXPECT_FLOAT_EQ(out.ptr<float>()[3], 0.75f); // sigmoid(log 3) = 3/4
        Tensor act = zeros({1, 3});
        ops::silu_mul(ctx, gu, act);
        EXPECT_EQ(act.ptr<float>()[0], 0.0f);
        EXPECT_EQ(act.ptr<float>()[1], 0.0f); // silu(-200) * 2, no NaN
        EXPECT_NEAR(act.ptr<float>()[2], 3.0 * sigmoid(1.0), 1e-6);
    }
}

TEST(Elementwise, ThreeDimStridedViewsAndAliasing) {
    // [T, heads, D] views into a [T, heads * 2D] projection (the attention gate layout).
    const int64_t T = 7, heads = 4, D = 32;
    Tensor proj = random_tensor({T, heads * 2 * D}, 37, 2.0f);
    auto half = [&](int64_t which) {
        TensorView v = proj.view();
        v.data = proj.ptr<float>() + which * D;
        v.ndim = 3;
        v.shape = {T, heads, D, 1};
        v.stride = {heads * 2 * D, 2 * D, 1, 0};
        return v;
    };
    const TensorView x = half(0), gate = half(1);
    Tensor x2 = clone(x), gate2 = clone(gate);
    Tensor ref = zeros({T, heads, D});
    ops::sigmoid_mul(kRef, x2, gate2, ref);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = zeros({T, heads, D});
        ops::sigmoid_mul(ctx, x, gate, out);
        EXPECT_TRUE(near(out, ref, ctx.reference() ? kExact : kElementwiseF32));
        // A [T * heads, D] 2-D output for 3-D inputs: the same rows.
        Tensor out2d = zeros({T * heads, D});
        ops::sigmoid_mul(ctx, x, gate, out2d);
        EXPECT_TRUE(near(out2d, ref, ctx.reference() ? kExact : kElementwiseF32));
    }
    // In place: out aliases x exactly.
    Tensor inplace = clone(x2);
    ops::sigmoid_mul(kRef, inplace, gate2, inplace);
    EXPECT_TRUE(near(inplace, ref, kExact));
    Tensor acc = random_tensor({T, heads, D}, 38), acc_ref = zeros({T, heads, D});
    ops::add(kRef, acc, x, acc_ref);
    ops::add(kFast, acc, x, acc); // residual add in place
    EXPECT_TRUE(near(acc, acc_ref, kElementwiseF32));
}

TEST(Elementwise, SiluMulStridedGateUpRows) {
    const int64_t R = 17, N = 48;
    Tensor wide = random_tensor({R, 2 * N + 5}, 39, 3.0f);
    TensorView gu = wide.view().narrow(1, 0, 2 * N);
    Tensor ref = zeros({R, N}), fast = zeros({R, N});
    ops::silu_mul(kRef, clone(gu), ref);
    ops::silu_mul(kFast, gu, fast);
    EXPECT_TRUE(near(fast, ref, kElementwiseF32));
}

TEST(Elementwise, RejectsBadShapesAndDtypes) {
    Tensor a = random_tensor({4, 8}, 40), b = random_tensor({4, 8}, 41), out = zeros({4, 8});
    Tensor b_cols = random_tensor({4, 9}, 42), b_rows = random_tensor({3, 8}, 43);
    EXPECT_THROW(ops::add(kFast, a, b_cols, out), Error);
    EXPECT_THROW(ops::add(kFast, a, b_rows, out), Error);
    EXPECT_THROW(ops::sigmoid_mul(kFast, a, b_cols, out), Error);
    Tensor a_int = zeros({4, 8}, DType::I32);
    EXPECT_THROW(ops::add(kRef, a_int, b, out), Error);
    Tensor gu_bad = random_tensor({4, 15}, 44);
    EXPECT_THROW(ops::silu_mul(kFast, gu_bad, out), Error);
    Tensor gu = random_tensor({4, 16}, 45), out_rows = zeros({5, 8});
    EXPECT_THROW(ops::silu_mul(kFast, gu, out_rows), Error);
    Tensor a1d = random_tensor({8}, 46), out1d = zeros({8});
    EXPECT_THROW(ops::add(kFast, a1d, a1d, out1d), Error); // rank 1 is not a row view
    TensorView col = a.view();                             // last dim not contiguous
    col.shape = {8, 4, 1, 1};
    col.stride = {1, 8, 0, 0};
    Tensor out84 = zeros({8, 4});
    EXPECT_THROW(ops::add(kFast, col, col, out84), Error);
}

} // namespace
} // namespace ninfer::test
