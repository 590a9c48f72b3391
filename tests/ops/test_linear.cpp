// ops/linear.h: y = x w^T (optionally += y), Fast (BLAS) against Reference (FP64) and by hand;
// rms_norm_linear and rms_norm_linear_pair against their two ops.
#include "ops/linear.h"
#include "ops/op_test_util.h"
#include "ops/rms_norm.h"

namespace ninfer::test {
namespace {

struct Dims {
    int64_t K, N;
};

TEST(Linear, FastMatchesReferenceAcrossShapes) {
    for (Dims d : {Dims{8, 8}, Dims{64, 32}, Dims{256, 100}, Dims{2048, 64}, Dims{100, 2048}}) {
        Tensor w = random_tensor({d.N, d.K}, 21, 0.05f);
        for (int64_t T : {1, 3, 7, 17, 64, 65, 150}) {
            Tensor x = random_tensor({T, d.K}, uint64_t(22 + T), 1.0f);
            Tensor ref = zeros({T, d.N}), fast = zeros({T, d.N});
            ops::linear(kRef, x, w, ref);
            ops::linear(kFast, x, w, fast);
            EXPECT_TRUE(near(fast, ref, kReductionF32))
                << "T=" << T << " K=" << d.K << " N=" << d.N;
        }
    }
}

TEST(Linear, AccumulateAddsIntoExistingOutput) {
    for (int64_t T : {1, 17, 65}) {
        const int64_t K = 256, N = 96;
        Tensor x = random_tensor({T, K}, 23), w = random_tensor({N, K}, 24, 0.05f);
        Tensor y0 = random_tensor({T, N}, 25, 3.0f);
        Tensor ref = clone(y0), fast = clone(y0), plain = zeros({T, N});
        ops::linear(kRef, x, w, ref, /*accumulate=*/true);
        ops::linear(kFast, x, w, fast, /*accumulate=*/true);
        EXPECT_TRUE(near(fast, ref, kReductionF32)) << "T=" << T;
        // Reference: y0 + x w^T, with the sum formed once in FP64.
        ops::linear(kRef, x, w, plain);
        Tensor sum = zeros({T, N});
        for (int64_t i = 0; i < T * N; ++i)
            sum.ptr<float>()[i] = y0.ptr<float>()[i] + plain.ptr<float>()[i];
        EXPECT_TRUE(near(ref, sum, kElementwiseF32)) << "T=" << T;
    }
}

TEST(Linear, ReferenceMatchesHandComputedProduct) {
    // x [2, 3], w [4, 3] (nn.Linear layout: out features x in features); exact in binary.
    Tensor x = f32_tensor({2, 3}, {1, 2, 3, -1, 0.5f, 4});
    Tensor w = f32_tensor({4, 3}, {1, 0, 0, 0, 1, 0, 0.5f, -1, 2, 2, 2, 2});
    const std::vector<float> expect{1, 2, 4.5f, 12, -1, 0.5f, 7, 7};
    for (const auto& ctx : {kRef, kFast}) {
        Tensor y = zeros({2, 4});
        ops::linear(ctx, x, w, y);
        EXPECT_EQ(floats(y), expect);
        ops::linear(ctx, x, w, y, /*accumulate=*/true); // y = 2 x w^T
        for (size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(y.ptr<float>()[i], 2 * expect[i]);
    }
}

TEST(Linear, StridedRowsOfInputAndOutput) {
    // x is the first K columns of a wider activation; y the middle columns of a fused buffer.
    const int64_t T = 9, K = 64, N = 40;
    Tensor wide_x = random_tensor({T, K + 13}, 26);
    TensorView x = wide_x.view().narrow(1, 0, K);
    Tensor w = random_tensor({N, K}, 27, 0.1f);
    Tensor ref = zeros({T, N});
    ops::linear(kRef, clone(x), w, ref);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor wide_y = zeros({T, N + 24});
        fill_nan(wide_y);
        TensorView y = wide_y.view().narrow(1, 8, N);
        ops::linear(ctx, x, w, y);
        EXPECT_TRUE(near(y, ref, ctx.reference() ? kExact : kReductionF32));
        for (int64_t t = 0; t < T; ++t) {
            EXPECT_TRUE(std::isnan(wide_y.ptr<float>()[t * (N + 24) + 7]));
            EXPECT_TRUE(std::isnan(wide_y.ptr<float>()[t * (N + 24) + 8 + N]));
        }
    }
}

TEST(Linear, RejectsBadShapesAndDtypes) {
    Tensor x = random_tensor({3, 8}, 28), w = random_tensor({5, 8}, 29), y = zeros({3, 5});
    Tensor w_bad = random_tensor({5, 7}, 30), y_rows = zeros({4, 5}), y_cols = zeros({3, 6});
    EXPECT_THROW(ops::linear(kFast, x, w_bad, y), Error);
    EXPECT_THROW(ops::linear(kFast, x, w, y_rows), Error);
    EXPECT_THROW(ops::linear(kRef, x, w, y_cols), Error);
    Tensor x_int = zeros({3, 8}, DType::I32);
    EXPECT_THROW(ops::linear(kFast, x_int, w, y), Error);
    Tensor x_f64 = zeros({3, 8}, DType::F64); // the CPU backend computes in F32 only
    EXPECT_THROW(ops::linear(kFast, x_f64, w, y), Error);
    TensorView w_t = w.view(); // a transposed (non-contiguous) weight view
    w_t.shape = {8, 5, 1, 1};
    w_t.stride = {1, 8, 0, 0};
    Tensor y85 = zeros({3, 8});
    Tensor x5 = random_tensor({3, 5}, 31);
    EXPECT_THROW(ops::linear(kFast, x5, w_t, y85), Error);
}

// rms_norm_linear on the CPU is, by its contract, exactly rms_norm then linear (h written too).
TEST(RmsNormLinear, EqualsTheTwoOpsAndWritesTheNorm) {
    for (const ops::ExecContext& ctx : {kRef, kFast}) {
        for (int64_t T : {1, 5}) {
            const int64_t K = 96, N = 40;
            Tensor x = random_tensor({T, K}, 32, 2.0f), nw = random_tensor({K}, 33, 0.2f);
            Tensor w = random_tensor({N, K}, 34, 0.05f);
            Tensor h = zeros({T, K}), y = zeros({T, N});
            ops::rms_norm_linear(ctx, x, nw, 1e-6f, w, y, h);
            Tensor h2 = zeros({T, K}), y2 = zeros({T, N});
            ops::rms_norm(ctx, x, nw, 1e-6f, h2);
            ops::linear(ctx, h2, w, y2);
            EXPECT_TRUE(near(h, h2, kExact)) << "T=" << T;
            EXPECT_TRUE(near(y, y2, kExact)) << "T=" << T;
        }
    }
}

TEST(RmsNormLinear, RejectsMismatchedShapes) {
    Tensor x = random_tensor({2, 8}, 35), nw = random_tensor({8}, 36),
           w = random_tensor({4, 8}, 37);
    Tensor y = zeros({2, 4}), h = zeros({2, 8});
    EXPECT_NO_THROW(ops::rms_norm_linear(kFast, x, nw, 1e-6f, w, y, h));
    Tensor nw_bad = random_tensor({7}, 38), h_bad = zeros({2, 7}), y_bad = zeros({3, 4});
    EXPECT_THROW(ops::rms_norm_linear(kFast, x, nw_bad, 1e-6f, w, y, h), Error);
    EXPECT_THROW(ops::rms_norm_linear(kFast, x, nw, 1e-6f, w, y, h_bad), Error);
    EXPECT_THROW(ops::rms_norm_linear(kFast, x, nw, 1e-6f, w, y_bad, h), Error);
    Tensor w_bad = random_tensor({4, 9}, 39);
    EXPECT_THROW(ops::rms_norm_linear(kFast, x, nw, 1e-6f, w_bad, y, h), Error);
}

} // namespace
// rms_norm_linear_pair on the CPU is exactly rms_norm_linear then linear(h, w2).
TEST(RmsNormLinearPair, EqualsTheTwoCallsAndRejectsMismatchedShapes) {
    for (const ops::ExecContext& ctx : {kRef, kFast}) {
        const int64_t T = 3, K = 96, N = 40, N2 = 6;
        Tensor x = random_tensor({T, K}, 40, 2.0f), nw = random_tensor({K}, 41, 0.2f);
        Tensor w = random_tensor({N, K}, 42, 0.05f), w2 = random_tensor({N2, K}, 43, 0.05f);
        Tensor h = zeros({T, K}), y = zeros({T, N}), y2 = zeros({T, N2});
        ops::rms_norm_linear_pair(ctx, x, nw, 1e-6f, w, y, w2, y2, h);
        Tensor eh = zeros({T, K}), ey = zeros({T, N}), ey2 = zeros({T, N2});
        ops::rms_norm_linear(ctx, x, nw, 1e-6f, w, ey, eh);
        ops::linear(ctx, eh, w2, ey2);
        EXPECT_TRUE(near(h, eh, kExact));
        EXPECT_TRUE(near(y, ey, kExact));
        EXPECT_TRUE(near(y2, ey2, kExact));
        EXPECT_FALSE(near(y2, zeros({T, N2}), kExact)); // y2 was written
        Tensor w2_bad = random_tensor({N2, K + 1}, 44), y2_bad = zeros({T, N2 + 1});
        EXPECT_THROW(ops::rms_norm_linear_pair(ctx, x, nw, 1e-6f, w, y, w2_bad, y2, h), Error);
        EXPECT_THROW(ops::rms_norm_linear_pair(ctx, x, nw, 1e-6f, w, y, w2, y2_bad, h), Error);
        Tensor h_bad = zeros({T, K - 1});
        EXPECT_THROW(ops::rms_norm_linear_pair(ctx, x, nw, 1e-6f, w, y, w2, y2, h_bad), Error);
    }
}

} // namespace ninfer::test
