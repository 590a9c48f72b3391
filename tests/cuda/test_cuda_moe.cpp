// moe_experts' grouped (prefill) route on CUDA against the CPU reference (label cuda): pairs
// just above the GEMV boundary (64), skewed routing (1-2 experts busy, most empty), tails in
// T, H and I, the CUDA-core fallback for unaligned bf16 rows, the real 35B-A3B expert shape,
// and a graph capture of the grouped route replaying the eager result bit for bit.
#include <random>
#include <vector>

#include "cuda/moe_test_util.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

// Every token on the same k experts `busy` (k <= busy.size()), weights from a softmax-like
// spread, so all other experts stay empty and the busy ones span several M-tiles.
Routing skewed(int64_t T, const std::vector<int32_t>& busy, int64_t k) {
    Routing r{zeros({T, k}, DType::I32), zeros({T, k})};
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
            r.ids.ptr<int32_t>()[t * k + j] = busy[size_t(j)];
            r.weights.ptr<float>()[t * k + j] = float(j + 1 + t % 3) / float(k * (k + 1));
        }
    return r;
}

class CudaMoe : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    ops::ExecContext ctx() const { return cuda_ctx(dt()); }
    const Tolerance& tol() const { return dt() == DType::F32 ? kCudaF32 : kBf16Reduction; }
    Tensor input(std::initializer_list<int64_t> dims, uint64_t seed, float scale = 1.0f) const {
        return rounded(random_tensor(dims, seed, scale), dt());
    }

    // y0 + moe(x) on CUDA against the CPU reference, for one routing.
    void check_case(int64_t T, int64_t E, int64_t H, int64_t I, const Routing& r,
                    const std::string& what) const {
        const auto c = ctx();
        Tensor x = input({T, H}, 201), gu = input({E, 2 * I, H}, 202, 0.05f);
        Tensor down = input({E, H, I}, 203, 0.05f), y0 = input({T, H}, 204);
        Tensor ref = clone(y0);
        ops::moe_experts(kCpuRef, x, gu, down, r.ids, r.weights, ref);
        Tensor dy = to_device(c, y0, dt());
        ops::moe_experts(c, to_device(c, x, dt()), to_device(c, gu, dt()), to_device(c, down, dt()),
                         to_device(c, r.ids, DType::I32), to_device(c, r.weights, DType::F32), dy);
        EXPECT_TRUE(near(to_host(c, dy), ref, tol())) << what;
    }
};

TEST_P(CudaMoe, JustAboveTheGemvBoundary) {
    // 65 = 13 x 5 and 72 = 9 x 8 pairs: the smallest grouped calls.
    check_case(13, 16, 128, 64, routed(13, 16, 5, 210), "pairs=65");
    check_case(9, 16, 128, 64, routed(9, 16, 8, 211), "pairs=72");
}

TEST_P(CudaMoe, SkewedRoutingLeavesMostExpertsEmpty) {
    // 300 rows on each of two experts (several M-tiles of 64 or 128 plus a tail), 62 empty.
    check_case(300, 64, 128, 64, skewed(300, {3, 7}, 2), "two busy experts");
    // Every pair on one expert of 16 (k = 1): one long run of tiles.
    check_case(257, 16, 128, 64, skewed(257, {15}, 1), "one busy expert");
}

TEST_P(CudaMoe, TailsInTokensHiddenAndExpertWidth) {
    // T = 77 (no tile multiple); H = 200: a K tail of 8 in gate_up and an N tail in down;
    // I = 40: an N tail in gate_up and a K tail in down.
    check_case(77, 8, 200, 40, routed(77, 8, 3, 212), "H=200 I=40");
    // Enough pairs per expert (2400 over 16) for 128-row tiles, with tails.
    check_case(300, 16, 128, 64, routed(300, 16, 8, 213), "pairs=2400 E=16");
}

TEST_P(CudaMoe, UnalignedRowsTakeTheCudaCoreRoute) {
    // H, I not multiples of 8: no 16-byte rows, so bf16 too runs the CUDA-core kernels.
    check_case(40, 8, 100, 36, routed(40, 8, 4, 214), "H=100 I=36");
}

TEST_P(CudaMoe, GraphReplayEqualsEagerBitForBit) {
    const auto base = ctx();
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    const int64_t T = 300, E = 16, k = 8, H = 128, I = 64;
    const Routing r = routed(T, E, k, 215);
    Tensor x = to_device(c, input({T, H}, 216), dt()), y0 = input({T, H}, 217);
    Tensor gu = to_device(c, input({E, 2 * I, H}, 218, 0.05f), dt());
    Tensor down = to_device(c, input({E, H, I}, 219, 0.05f), dt());
    Tensor ids = to_device(c, r.ids, DType::I32), w = to_device(c, r.weights, DType::F32);
    Tensor y = to_device(c, y0, dt());
    ASSERT_TRUE(ops::moe_experts_capturable(c, T * k, H, I));
    // The grouped route's atomics order the slots differently per call.
    expect_replays_equal_eager(
        c, y0, y, [&] { ops::moe_experts(c, x, gu, down, ids, w, y); }, "T=300");
    ops::synchronize(c);
    ops::bind_device(base);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMoe, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// Qwen3.6-35B-A3B's experts in bf16 at T = 1024 (64-row tiles) and T = 4096 (128-row tiles, and
// from 32,768 pairs the wgmma route on sm_90), on sampled rows.
TEST(CudaMoeReal, Qwen35bExpertsAgainstTheReferenceOnSampledRows) {
    expect_qwen35b_experts_on_sampled_rows({1024, 4096}, 220, "table in force");
}

} // namespace
} // namespace ninfer::test
