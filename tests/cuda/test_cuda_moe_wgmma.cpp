// The sm_90 wgmma grouped GEMM (ops/cuda/moe_grouped_sm90.h, CUTLASS) and moe_experts' route
// through it (route table decision moe_experts.bf16), label cuda:
//   - the GEMM alone against an FP64 host reference: empty groups, M/N/K tails against the
//     128 x 128 x 64 tile, and rows no group owns left as they were; a sabotage arm (the groups'
//     ends shifted by one row) must fail the same comparison;
//   - moe_experts forced onto it against the CPU reference: random and skewed routing, another
//     rank's experts (ids -1), the 35B's expert shapes, and a graph replay equal to eager;
//   - the route is taken on sm_90 and nowhere else (portable mode included).
// On an sm_90 GPU the route must be built and fit: a build without it fails here, loudly.
#include <vector>

#include "core/dtype.h"
#include "cuda/moe_test_util.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/moe_grouped_sm90.h"
#include "ops/moe.h"
#include "ops/route_table.h"

namespace ninfer::test {
namespace {

using ops::RouteId;

bool on_sm90() {
    return ops::cuda::device_caps(0).arch == 90;
}

// d[r, n] = sum_k a[r, k] w[e, n, k] over each group's rows [end - count, end), in FP64, rounded
// to bf16 as the kernel's output is.
Tensor grouped_reference(const Tensor& a, const Tensor& w, const std::vector<int32_t>& count,
                         const std::vector<int32_t>& end, const Tensor& d0) {
    Tensor d = clone(d0);
    const int64_t N = w.size(1), K = w.size(2);
    for (size_t e = 0; e < count.size(); ++e)
        for (int64_t r = end[e] - count[e]; r < end[e]; ++r)
            for (int64_t n = 0; n < N; ++n) {
                double s = 0.0;
                for (int64_t k = 0; k < K; ++k)
                    s += double(a.ptr<float>()[r * K + k]) *
                         double(w.ptr<float>()[(int64_t(e) * N + n) * K + k]);
                d.ptr<float>()[r * N + n] = bf16_to_float(float_to_bf16(float(s)));
            }
    return d;
}

struct GroupedCase {
    std::vector<int32_t> count;
    int64_t N, K;
};

// The GEMM on the device for the groups' rows (packed in group order after `gap` unowned rows),
// and the reference; `shift` moves every group's end (the sabotage arm).
std::pair<Tensor, Tensor> run_grouped(const GroupedCase& gc, int64_t gap, int shift) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t E = int64_t(gc.count.size());
    std::vector<int32_t> end(gc.count.size());
    int64_t rows = gap;
    for (size_t e = 0; e < gc.count.size(); ++e) end[e] = int32_t(rows += gc.count[e]);
    rows += 5; // unowned rows after the last group too
    const Tensor a = rounded(random_tensor({rows, gc.K}, 301), DType::BF16);
    const Tensor w = rounded(random_tensor({E, gc.N, gc.K}, 302, 0.1f), DType::BF16);
    // What unowned rows must keep (bf16 values, so the device copy holds them exactly).
    const Tensor d0 = rounded(random_tensor({rows, gc.N}, 303), DType::BF16);
    std::vector<int32_t> dev_end = end;
    for (int32_t& v : dev_end) v += shift;
    Tensor count_t = zeros({E}, DType::I32), end_t = zeros({E}, DType::I32);
    for (int64_t e = 0; e < E; ++e) {
        count_t.ptr<int32_t>()[e] = gc.count[size_t(e)];
        end_t.ptr<int32_t>()[e] = dev_end[size_t(e)];
    }
    Tensor da = to_device(c, a, DType::BF16), dw = to_device(c, w, DType::BF16);
    Tensor dd = to_device(c, d0, DType::BF16);
    Tensor dcount = to_device(c, count_t, DType::I32), dend = to_device(c, end_t, DType::I32);
    const ops::cuda::WgmmaGroupedGemm g{da.view().data,
                                        dw.view().data,
                                        dd.ptr<__nv_bfloat16>(),
                                        dcount.ptr<int32_t>(),
                                        dend.ptr<int32_t>(),
                                        E,
                                        gc.N,
                                        gc.K};
    EXPECT_TRUE(ops::cuda::wgmma_grouped_fits(c, g));
    ops::cuda::wgmma_grouped_gemm(c, g);
    return {to_host(c, dd), grouped_reference(a, w, gc.count, end, d0)};
}

TEST(CudaMoeWgmma, RouteIsBuiltAndTakenOnSm90Only) {
    const auto c = cuda_ctx(DType::BF16);
    const ops::cuda::WgmmaGroupedGemm g{nullptr, nullptr, nullptr, nullptr, nullptr, 256, 1024,
                                        2048};
    EXPECT_EQ(ops::cuda::wgmma_grouped_built() && ops::cuda::wgmma_grouped_fits(c, g), on_sm90())
        << "an sm_90 GPU must take the wgmma grouped GEMM (built with CUTLASS: "
           "cmake/cutlass.cmake); other GPUs must not";
    // Shapes TMA cannot take are refused, not run.
    EXPECT_FALSE(ops::cuda::wgmma_grouped_fits(c, {nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   8, 64, 100})); // K % 8
    EXPECT_FALSE(ops::cuda::wgmma_grouped_fits(
        c, {nullptr, nullptr, nullptr, nullptr, nullptr, 8, 68, 128})); // N % 8
    ops::cuda::set_portable_kernels(true);
    EXPECT_FALSE(ops::cuda::wgmma_grouped_fits(c, g)) << "portable mode runs the sm_80 routes";
    ops::cuda::set_portable_kernels(false);
}

TEST(CudaMoeWgmma, GroupedGemmAgainstFp64WithEmptyGroupsAndTails) {
    ASSERT_TRUE(on_sm90()) << "the wgmma grouped GEMM needs an sm_90 GPU (H100 / H200)";
    // Empty groups first, in the middle and last; M tails (1, 7, 130, 300 against 128-row tiles);
    // N = 136 (a 128-column tile plus 8) and K = 200 (three 64-deep stages plus 8).
    const GroupedCase tails{{0, 1, 130, 0, 7, 300, 0}, 136, 200};
    auto [got, ref] = run_grouped(tails, 3, 0);
    EXPECT_TRUE(near(got, ref, kBf16Elementwise)) << "tails";
    // Many groups of a few rows each (a decode-sized batch over 64 experts), N and K of the 35B's
    // down projection scaled down.
    std::vector<int32_t> few(64);
    for (size_t e = 0; e < few.size(); ++e) few[e] = int32_t(e % 3);
    auto [got2, ref2] = run_grouped({few, 256, 512}, 0, 0);
    EXPECT_TRUE(near(got2, ref2, kBf16Elementwise)) << "64 small groups";
}

TEST(CudaMoeWgmma, SabotagedGroupEndsFailTheComparison) {
    ASSERT_TRUE(on_sm90());
    // Every group's rows one off: the comparison above must catch it.
    auto [got, ref] = run_grouped({{0, 1, 130, 0, 7, 300, 0}, 136, 200}, 3, 1);
    EXPECT_FALSE(near(got, ref, kBf16Elementwise));
}

// y0 + moe(x) with moe_experts.bf16 forced to `kernel`, against the CPU reference.
void check_experts(int kernel, int64_t T, int64_t E, int64_t H, int64_t I, const Routing& r,
                   const std::string& what) {
    const auto c = cuda_ctx(DType::BF16);
    ForcedRoute forced(RouteId::MoeExpertsBf16, kernel);
    Tensor x = rounded(random_tensor({T, H}, 311), DType::BF16);
    Tensor gu = rounded(random_tensor({E, 2 * I, H}, 312, 0.05f), DType::BF16);
    Tensor down = rounded(random_tensor({E, H, I}, 313, 0.05f), DType::BF16);
    Tensor y0 = rounded(random_tensor({T, H}, 314), DType::BF16);
    Tensor ref = clone(y0);
    ops::moe_experts(kCpuRef, x, gu, down, r.ids, r.weights, ref);
    Tensor dy = to_device(c, y0, DType::BF16);
    ops::moe_experts(c, to_device(c, x, DType::BF16), to_device(c, gu, DType::BF16),
                     to_device(c, down, DType::BF16), to_device(c, r.ids, DType::I32),
                     to_device(c, r.weights, DType::F32), dy);
    EXPECT_TRUE(near(to_host(c, dy), ref, kBf16Reduction)) << what;
}

TEST(CudaMoeWgmma, ExpertsOnTheRouteMatchTheReference) {
    ASSERT_TRUE(on_sm90());
    for (int kernel : {ops::kRouteMmaSync, ops::kRouteWgmma}) {
        const std::string k = kernel == ops::kRouteWgmma ? "wgmma " : "mma_sync ";
        check_experts(kernel, 13, 16, 128, 64, routed(13, 16, 5, 320), k + "pairs=65");
        check_experts(kernel, 300, 16, 128, 64, routed(300, 16, 8, 321), k + "pairs=2400");
        check_experts(kernel, 77, 8, 200, 40, routed(77, 8, 3, 322), k + "H=200 I=40");
    }
}

TEST(CudaMoeWgmma, OtherRanksExpertsAreSkipped) {
    ASSERT_TRUE(on_sm90());
    // Expert parallelism's ids: -1 for another rank's expert (ops/moe.h); a third of the pairs.
    Routing r = routed(200, 16, 6, 330);
    for (int64_t i = 0; i < r.ids.numel(); i += 3) r.ids.ptr<int32_t>()[i] = -1;
    check_experts(ops::kRouteWgmma, 200, 16, 128, 64, r, "held experts");
}

// The 35B's experts at T = 4096 through the route, on sampled rows.
TEST(CudaMoeWgmma, Qwen35bExpertsOnSampledRows) {
    ASSERT_TRUE(on_sm90());
    ForcedRoute forced(RouteId::MoeExpertsBf16, ops::kRouteWgmma);
    expect_qwen35b_experts_on_sampled_rows({4096}, 340, "wgmma");
}

// A serving step at --max-batch-tokens 65536: 524,288 (token, expert) pairs, where the sorted
// bf16 rows are exactly 2^31 bytes (the gate/up product as well, f32 until the GEMMs wrote bf16).
// The bf16 35B served with that budget (H200, 2026-12-07) stopped 801 of 1,000 requests with
// non-finite logits while the fp8 35B (W8A8 experts) served every one; both grouped routes are
// checked at that size.
TEST(CudaMoeWgmma, Qwen35bExpertsAtAFullBudgetStep) {
    ASSERT_TRUE(on_sm90());
    {
        ForcedRoute forced(RouteId::MoeExpertsBf16, ops::kRouteWgmma);
        expect_qwen35b_experts_on_sampled_rows({65536}, 360, "wgmma");
    }
    ForcedRoute forced(RouteId::MoeExpertsBf16, ops::kRouteMmaSync);
    expect_qwen35b_experts_on_sampled_rows({65536}, 360, "mma_sync");
}

// A serving step at the full budget, each route over a pool filled with NaN first (a step's
// scratch comes from the pool, where earlier steps left their data: every row a route reads must
// be written), with random routing and with every token on the same 8 experts (random-weight
// models route alike tokens alike: 65,536 rows for one expert). Every row of the wgmma output
// must be finite and equal the mma.sync route's within the bf16 preset.
TEST(CudaMoeWgmma, FullBudgetStepOverStaleScratchEqualsMmaSyncOnEveryRow) {
    ASSERT_TRUE(on_sm90());
    const auto c = cuda_ctx(DType::BF16);
    const int64_t T = 65536, E = 256, k = 8, H = 2048, I = 512;
    Tensor gu = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {E, 2 * I, H});
    Tensor down = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {E, H, I});
    Tensor x = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {T, H});
    ops::fill_random(c, gu, 370, 0.0f, 0.02f);
    ops::fill_random(c, down, 371, 0.0f, 0.02f);
    ops::fill_random(c, x, 372, 0.0f, 1.0f);
    Routing same = {zeros({T, k}, DType::I32), zeros({T, k})};
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
            same.ids.ptr<int32_t>()[t * k + j] = int32_t(j);
            same.weights.ptr<float>()[t * k + j] = 1.0f / float(k);
        }
    for (const auto& [name, r] : {std::pair{"random routing", routed(T, E, k, 373)},
                                  std::pair{"every token on experts 0-7", same}}) {
        Tensor ids = to_device(c, r.ids, DType::I32), w = to_device(c, r.weights, DType::F32);
        const auto run = [&](int route) {
            leave_nan_in_pool(c, int64_t(12) << 30); // more than the step's scratch
            ForcedRoute forced(RouteId::MoeExpertsBf16, route);
            Tensor y = to_device(c, zeros({T, H}), DType::BF16);
            ops::moe_experts(c, x, gu, down, ids, w, y);
            return to_host(c, y);
        };
        const Tensor wgmma = run(ops::kRouteWgmma), mma_sync = run(ops::kRouteMmaSync);
        EXPECT_TRUE(all_finite(wgmma, H)) << name;
        EXPECT_TRUE(all_finite(mma_sync, H)) << name;
        EXPECT_TRUE(near(wgmma, mma_sync, kBf16Reduction)) << name;
    }
}

TEST(CudaMoeWgmma, GraphReplayEqualsEagerBitForBit) {
    ASSERT_TRUE(on_sm90());
    const auto base = cuda_ctx(DType::BF16);
    ForcedRoute forced(RouteId::MoeExpertsBf16, ops::kRouteWgmma);
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    const int64_t T = 300, E = 16, k = 8, H = 128, I = 64;
    const Routing r = routed(T, E, k, 350);
    Tensor x = to_device(c, rounded(random_tensor({T, H}, 351), DType::BF16), DType::BF16);
    Tensor y0 = rounded(random_tensor({T, H}, 352), DType::BF16);
    Tensor gu = to_device(c, rounded(random_tensor({E, 2 * I, H}, 353, 0.05f), DType::BF16),
                          DType::BF16);
    Tensor down = to_device(c, rounded(random_tensor({E, H, I}, 354, 0.05f), DType::BF16),
                            DType::BF16);
    Tensor ids = to_device(c, r.ids, DType::I32), w = to_device(c, r.weights, DType::F32);
    Tensor y = to_device(c, y0, DType::BF16);
    expect_replays_equal_eager(
        c, y0, y, [&] { ops::moe_experts(c, x, gu, down, ids, w, y); }, "wgmma T=300");
    ops::synchronize(c);
    ops::bind_device(base);
}

} // namespace
} // namespace ninfer::test
