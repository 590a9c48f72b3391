// ops/rms_norm.h and ops/gated_rms_norm.h: CPU fast path against the CPU reference.
#include <cmath>

#include "common/test_util.h"
#include "ops/gated_rms_norm.h"
#include "ops/rms_norm.h"

namespace ninfer::test {
namespace {

const ops::ExecContext kRef = ops::ExecContext::cpu(ops::CpuMode::Reference);
const ops::ExecContext kFast = ops::ExecContext::cpu(ops::CpuMode::Fast);

TEST(RmsNorm, FastMatchesReferenceAcrossShapes) {
    for (int64_t T : {1, 3, 17, 64}) {
        for (int64_t H : {1, 8, 100, 2048}) {
            Tensor x = random_tensor({T, H}, 1, 3.0f);
            Tensor w = random_tensor({H}, 2, 0.2f);
            Tensor ref = zeros({T, H}), fast = zeros({T, H});
            ops::rms_norm(kRef, x, w, 1e-6f, ref);
            ops::rms_norm(kFast, x, w, 1e-6f, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "T=" << T << " H=" << H;
        }
    }
}

TEST(RmsNorm, ReferenceIsZeroCentredFormula) {
    // y = x * rsqrt(mean(x^2) + eps) * (1 + w): check one row by hand.
    Tensor x = zeros({1, 2}), w = zeros({2}), y = zeros({1, 2});
    x.ptr<float>()[0] = 3.0f;
    x.ptr<float>()[1] = 4.0f;
    w.ptr<float>()[0] = 0.5f;
    w.ptr<float>()[1] = -0.25f;
    ops::rms_norm(kRef, x, w, 0.0f, y);
    const double inv = 1.0 / std::sqrt(12.5);
    EXPECT_NEAR(y.ptr<float>()[0], 3.0 * inv * 1.5, 1e-6);
    EXPECT_NEAR(y.ptr<float>()[1], 4.0 * inv * 0.75, 1e-6);
}

TEST(RmsNorm, StridedHeadViewsAndInPlace) {
    // [T, heads, D] query halves inside a [T, heads * 2D] projection, as the model uses it.
    const int64_t T = 5, heads = 3, D = 16;
    Tensor proj = random_tensor({T, heads * 2 * D}, 3);
    TensorView q = proj.view();
    q.ndim = 3;
    q.shape = {T, heads, D, 1};
    q.stride = {heads * 2 * D, 2 * D, 1, 0};
    Tensor w = random_tensor({D}, 4, 0.2f);
    Tensor ref = zeros({T, heads, D}), fast = zeros({T, heads, D});
    ops::rms_norm(kRef, q, w, 1e-6f, ref);
    ops::rms_norm(kFast, q, w, 1e-6f, fast);
    EXPECT_TRUE(near(fast, ref, kElementwiseF32));
    Tensor inplace = clone(ref);
    ops::rms_norm(kRef, inplace, w, 1e-6f, inplace); // aliasing x and y is allowed
    Tensor expect = zeros({T, heads, D});
    ops::rms_norm(kRef, ref, w, 1e-6f, expect);
    EXPECT_TRUE(near(inplace, expect, kExact));
}

TEST(RmsNorm, RejectsBadShapes) {
    Tensor x = random_tensor({2, 8}, 1), w = random_tensor({7}, 2), y = zeros({2, 8});
    EXPECT_THROW(ops::rms_norm(kFast, x, w, 1e-6f, y), Error);
    Tensor w8 = random_tensor({8}, 2), y_bad = zeros({3, 8});
    EXPECT_THROW(ops::rms_norm(kFast, x, w8, 1e-6f, y_bad), Error);
}

TEST(GatedRmsNorm, FastMatchesReference) {
    for (int64_t T : {1, 7, 33}) {
        const int64_t Hv = 4, dv = 32;
        Tensor x = random_tensor({T, Hv, dv}, 5, 2.0f);
        Tensor z = random_tensor({T, Hv, dv}, 6, 2.0f);
        Tensor w = random_tensor({dv}, 7, 0.2f);
        Tensor ref = zeros({T, Hv, dv}), fast = zeros({T, Hv, dv});
        ops::gated_rms_norm(kRef, x, z, w, 1e-6f, ref);
        ops::gated_rms_norm(kFast, x, z, w, 1e-6f, fast);
        EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "T=" << T;
    }
}

TEST(GatedRmsNorm, PlainWeightAndSiluGate) {
    // y = w * norm(x) * silu(z), with a plain weight (no 1 + w).
    Tensor x = zeros({1, 2}), z = zeros({1, 2}), w = zeros({2}), y = zeros({1, 2});
    x.ptr<float>()[0] = 1.0f;
    x.ptr<float>()[1] = -1.0f;
    z.ptr<float>()[0] = 2.0f;
    z.ptr<float>()[1] = 0.0f;
    w.ptr<float>()[0] = 2.0f;
    w.ptr<float>()[1] = 3.0f;
    ops::gated_rms_norm(kRef, x, z, w, 0.0f, y);
    EXPECT_NEAR(y.ptr<float>()[0], 2.0 * 1.0 * (2.0 / (1.0 + std::exp(-2.0))), 1e-6);
    EXPECT_NEAR(y.ptr<float>()[1], 0.0, 1e-7);
}

} // namespace
} // namespace ninfer::test
