// moe_experts' W8A8 route for block-wise fp8 stacks (ops/cuda/moe_w8a8.h: activations quantized
// per 128 columns, CUTLASS's block-scaled fp8 wgmma grouped GEMM), route table decision
// moe_experts.fp8 forced to each of its two kernels (the GEMM over an expert's rows, and swapped
// for decode batches), label cuda:
//   - against an FP64 host pipeline that quantizes and rounds exactly as the route does (x per
//     row and 128 columns, the GEMM outputs to bf16, SwiGLU in f32, the activations again): small
//     stacks with tails of experts without pairs, another rank's experts (ids -1), and the 35B's
//     expert shapes on sampled rows;
//   - a sabotage arm (the weight scales handed over in the checkpoint's layout, untransposed)
//     must fail the same comparison;
//   - the route is taken on sm_90 (by the built-in table too) and not in portable mode.
// On an sm_90 GPU the route must be built and fit: a build without it fails here, loudly.
#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda/fp8_test_util.h"
#include "cuda/moe_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/moe_w8a8.h"
#include "ops/route_table.h"

namespace ninfer::test {
namespace {

using ops::RouteId;

// f rounded to bf16 (nearest even), as a float.
float as_bf16(float f) {
    return bf16_to_float(float_to_bf16(f));
}

// y[t] + sum_j w[t, j] * bf16(down_e . q(silu(g) * u)), [g | u] = bf16(gate_up_e . q(x[t])), q()
// the W8A8 activation quantization, bf16() the GEMMs' output rounding, weights dense (exact
// dequantization), products in FP64, for rows [begin, begin + n).
Tensor w8a8_reference(const Tensor& x, const Tensor& gu, const Tensor& down, const Routing& r,
                      const Tensor& y0, int64_t begin, int64_t n) {
    const int64_t H = x.size(1), I = down.size(2), k = r.ids.size(1);
    Tensor y = clone(rows(y0, begin, n));
    const Tensor xq = w8a8_activations(rows(x, begin, n));
    for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = r.ids.ptr<int32_t>()[(begin + t) * k + j];
            if (e < 0) continue;
            Tensor act = zeros({1, I});
            for (int64_t i = 0; i < I; ++i) {
                double g = 0.0, u = 0.0;
                const float* gw = gu.ptr<float>() + (int64_t(e) * 2 * I + i) * H;
                const float* uw = gu.ptr<float>() + (int64_t(e) * 2 * I + I + i) * H;
                for (int64_t c = 0; c < H; ++c) {
                    g += double(xq.ptr<float>()[t * H + c]) * gw[c];
                    u += double(xq.ptr<float>()[t * H + c]) * uw[c];
                }
                const float gf = as_bf16(float(g)), uf = as_bf16(float(u));
                act.ptr<float>()[i] = gf / (1.0f + std::exp(-gf)) * uf;
            }
            const Tensor aq = w8a8_activations(act);
            const float w = r.weights.ptr<float>()[(begin + t) * k + j];
            for (int64_t h = 0; h < H; ++h) {
                double o = 0.0;
                const float* dw = down.ptr<float>() + (int64_t(e) * H + h) * I;
                for (int64_t i = 0; i < I; ++i) o += double(aq.ptr<float>()[i]) * dw[i];
                y.ptr<float>()[t * H + h] += float(double(w) * as_bf16(float(o)));
            }
        }
    return y;
}

struct W8a8Case {
    int64_t T, E, k, H, I;
    int64_t other_rank_every = 0; // every n-th pair's id set to -1 (0: none)
    int64_t sampled = 0;          // rows checked at each end (0: all)
};

// moe_experts_fp8 on the W8A8 route against w8a8_reference; whether every checked row is near.
bool run_w8a8(const W8a8Case& w, uint64_t seed, std::string* what) {
    const auto c = cuda_ctx(DType::BF16);
    const HostFp8 gu({w.E, 2 * w.I, w.H}, 128, 128, seed, Fp8Codes::Normal, 2e-4f, 6e-4f);
    const HostFp8 dn({w.E, w.H, w.I}, 128, 128, seed + 1, Fp8Codes::Normal, 2e-4f, 6e-4f);
    const DeviceFp8 d_gu(c, gu), d_dn(c, dn);
    Routing r = routed(w.T, w.E, w.k, seed + 2);
    if (w.other_rank_every > 0)
        for (int64_t p = 0; p < w.T * w.k; p += w.other_rank_every) r.ids.ptr<int32_t>()[p] = -1;
    const Tensor x = rounded(random_tensor({w.T, w.H}, seed + 3), DType::BF16);
    const Tensor y0 = rounded(random_tensor({w.T, w.H}, seed + 4), DType::BF16);
    Tensor dx = to_device(c, x, DType::BF16), dy = to_device(c, y0, DType::BF16);
    *what = "T=" + std::to_string(w.T) + " E=" + std::to_string(w.E) +
            " k=" + std::to_string(w.k) + " H=" + std::to_string(w.H) +
            " I=" + std::to_string(w.I);
    if (!ops::cuda::w8a8_route(c, d_gu.view, d_dn.view, w.T * w.k)) {
        *what += ": the W8A8 route does not take it";
        return false;
    }
    ops::cuda::moe_experts_fp8(c, dx, d_gu.view, d_dn.view, to_device(c, r.ids, DType::I32),
                               to_device(c, r.weights, DType::F32), dy);
    const Tensor got = to_host(c, dy);
    const Tensor dense_gu = gu.dense(), dense_dn = dn.dense();
    const int64_t n = w.sampled > 0 ? w.sampled : w.T;
    bool close = true;
    for (int64_t begin : {int64_t(0), w.T - n}) {
        const Tensor ref = w8a8_reference(x, dense_gu, dense_dn, r, y0, begin, n);
        close = close && near(rows(got, begin, n), ref, kBf16Reduction);
        if (n == w.T) break;
    }
    return close;
}

// Each case on both shapes of the GEMM: over an expert's rows (wgmma_w8a8) and swapped
// (wgmma_w8a8_swap: 32-row tiles over the rows, so 150 rows per expert take 5 of them).
class CudaMoeW8a8 : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (ops::cuda::device_caps(0).arch != 90)
            GTEST_FAIL() << "the W8A8 wgmma route is sm_90's; run this suite on an H100/H200";
    }
    ForcedRoute forced_{RouteId::MoeExpertsFp8, GetParam()};
};

TEST_P(CudaMoeW8a8, SmallStacksAgainstQuantizedReference) {
    std::string what;
    // Pairs past the GEMV route (64); few rows per expert, so several experts have none.
    EXPECT_TRUE(run_w8a8({40, 16, 2, 256, 256}, 11, &what)) << what;
    EXPECT_TRUE(run_w8a8({300, 8, 4, 384, 256}, 12, &what)) << what;
    EXPECT_TRUE(run_w8a8({129, 32, 8, 256, 384}, 13, &what)) << what;
}

TEST_P(CudaMoeW8a8, DecodeBatchOnTheQwen35bExperts) {
    std::string what;
    // 24 tokens x top-8 over 256 experts: most experts own 0 or 1 rows.
    EXPECT_TRUE(run_w8a8({24, 256, 8, 2048, 512}, 15, &what)) << what;
}

TEST_P(CudaMoeW8a8, OtherRanksExpertsAreSkipped) {
    std::string what;
    EXPECT_TRUE(run_w8a8({100, 16, 4, 256, 256, /*other_rank_every=*/3}, 21, &what)) << what;
}

TEST_P(CudaMoeW8a8, Qwen35bExpertsOnSampledRows) {
    std::string what;
    EXPECT_TRUE(run_w8a8({1024, 256, 8, 2048, 512, 0, /*sampled=*/24}, 31, &what)) << what;
}

TEST_P(CudaMoeW8a8, UntransposedScalesAreCaught) {
    std::string what;
    ops::cuda::set_w8a8_scale_sabotage(true);
    const bool close = run_w8a8({300, 8, 4, 384, 256}, 12, &what);
    ops::cuda::set_w8a8_scale_sabotage(false);
    EXPECT_FALSE(close) << "untransposed weight scales went unnoticed: " << what;
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaMoeW8a8,
                         ::testing::Values(ops::kRouteWgmmaW8a8, ops::kRouteWgmmaW8a8Swap),
                         [](const ::testing::TestParamInfo<int>& kernel) {
                             return std::string(kernel.param == ops::kRouteWgmmaW8a8Swap
                                                    ? "swapped"
                                                    : "rows");
                         });

TEST(CudaMoeW8a8Route, NotInPortableMode) {
    const auto c = cuda_ctx(DType::BF16);
    ForcedRoute forced(RouteId::MoeExpertsFp8, ops::kRouteWgmmaW8a8);
    const HostFp8 gu({8, 512, 256}, 128, 128, 41, Fp8Codes::Normal, 2e-4f, 6e-4f);
    const HostFp8 dn({8, 256, 256}, 128, 128, 42, Fp8Codes::Normal, 2e-4f, 6e-4f);
    const DeviceFp8 d_gu(c, gu), d_dn(c, dn);
    EXPECT_EQ(ops::cuda::w8a8_route(c, d_gu.view, d_dn.view, 1024),
              ops::cuda::device_caps(0).arch == 90);
    ops::cuda::set_portable_kernels(true);
    EXPECT_FALSE(ops::cuda::w8a8_route(c, d_gu.view, d_dn.view, 1024));
    ops::cuda::set_portable_kernels(false);
    // The built-in table takes it wherever it runs.
    ops::set_active_route_table(ops::RouteTable::builtin());
    EXPECT_EQ(ops::cuda::w8a8_route(c, d_gu.view, d_dn.view, 1024),
              ops::cuda::device_caps(0).arch == 90);
}

} // namespace
} // namespace ninfer::test
