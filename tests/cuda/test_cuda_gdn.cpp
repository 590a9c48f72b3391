// The chunked gated delta rule on CUDA (tensor-core route for bf16, f32 route for F32) against
// the CPU reference (label cuda): the Qwen3.6-27B shape (Hk 16, Hv 48, dk = dv = 128) over many
// chunks, ragged multi-sequence batches with decode rows and chunk-boundary lengths, strong decay
// (e^G underflows inside a chunk), no decay, and beta at 0 and 1. Outputs are held to the
// activation dtype's reduction tolerance, the final state to the f32 one.
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "cuda/cuda_test_util.h"
#include "ops/gated_delta_rule.h"

namespace ninfer::test {
namespace {

struct GdnCase {
    int64_t Hk = 16, Hv = 48, dk = 128, dv = 128;
    std::vector<int32_t> rows;
    // g[t, h] and beta[t, h] from a uniform u in [0, 1) (per element).
    std::function<float(float)> g = [](float u) { return -0.3f * u; };
    std::function<float(float)> beta = [](float u) { return 0.2f + 0.6f * u; };
    ops::GdnAlgo algo = ops::GdnAlgo::Auto;
};

class CudaGdn : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    const Tolerance& out_tol() const { return dt() == DType::F32 ? kCudaF32 : kBf16Reduction; }

    void run(const GdnCase& tc) const {
        const auto c = cuda_ctx(dt());
        const int64_t T = std::accumulate(tc.rows.begin(), tc.rows.end(), int64_t(0));
        const int64_t slots = int64_t(tc.rows.size()) + 1;
        Tensor q = rounded(random_tensor({T, tc.Hk, tc.dk}, 160), dt());
        Tensor k = rounded(random_tensor({T, tc.Hk, tc.dk}, 161), dt());
        Tensor v = rounded(random_tensor({T, tc.Hv, tc.dv}, 162), dt());
        Tensor g = zeros({T, tc.Hv}), beta = zeros({T, tc.Hv});
        std::mt19937 rng(163);
        std::uniform_real_distribution<float> uni(0.0f, 1.0f);
        for (int64_t i = 0; i < g.numel(); ++i) {
            g.ptr<float>()[i] = tc.g(uni(rng));
            beta.ptr<float>()[i] = tc.beta(uni(rng));
        }
        Tensor state = random_tensor({slots, tc.Hv, tc.dk, tc.dv}, 164, 0.1f);
        // Sequence s uses slot slots - 1 - s (slot 0 stays untouched unless the batch is full).
        std::vector<SeqSpec> seqs;
        for (size_t s = 0; s < tc.rows.size(); ++s)
            seqs.push_back({tc.rows[s], int32_t(5 * s), int32_t(slots - 1 - int64_t(s))});
        DualBatch batch(c, seqs);
        Tensor ref_state = clone(state), ref = zeros({T, tc.Hv, tc.dv});
        ops::gated_delta_rule(kCpuRef, q, k, v, g, beta, batch.host(), ref_state, ref);
        Tensor d_state = to_device(c, state, DType::F32);
        Tensor out = to_device(c, zeros({T, tc.Hv, tc.dv}), dt());
        ops::gated_delta_rule(c, to_device(c, q, dt()), to_device(c, k, dt()),
                              to_device(c, v, dt()), to_device(c, g, DType::F32),
                              to_device(c, beta, DType::F32), batch.device(), d_state, out,
                              tc.algo);
        EXPECT_TRUE(near(to_host(c, out), ref, out_tol())) << "T=" << T << " Hv=" << tc.Hv;
        EXPECT_TRUE(near(to_host(c, d_state), ref_state, kCudaF32)) << "T=" << T;
    }
};

TEST_P(CudaGdn, RealShapeLongSequence) {
    GdnCase tc;
    tc.rows = {1000}; // 15 full chunks and a 40-row tail
    run(tc);
}

TEST_P(CudaGdn, RealShapeRaggedPair) {
    GdnCase tc;
    tc.rows = {700, 301}; // tails of 60 and 45 rows; the second sequence starts mid-chunk
    run(tc);
}

TEST_P(CudaGdn, RaggedDecodeRowsAndChunkBoundaries) {
    GdnCase tc;
    tc.rows = {64, 1, 65, 128, 33, 1, 127};
    tc.algo = ops::GdnAlgo::Chunked; // one-row sequences through the chunked route too
    run(tc);
}

TEST_P(CudaGdn, StrongDecay) {
    GdnCase tc;
    tc.rows = {200, 77};
    tc.g = [](float u) { return -(5.0f + 40.0f * u); }; // e^G underflows within a few rows
    run(tc);
}

TEST_P(CudaGdn, NoDecay) {
    GdnCase tc;
    tc.rows = {300};
    tc.g = [](float u) { return -1e-4f * u; }; // the state carries every chunk forward
    run(tc);
}

TEST_P(CudaGdn, BetaZeroAndOne) {
    GdnCase tc;
    tc.rows = {250, 3};
    tc.beta = [](float u) { return u < 0.5f ? 0.0f : 1.0f; };
    tc.algo = ops::GdnAlgo::Chunked;
    run(tc);
    tc.rows = {190};
    tc.g = [](float) { return 0.0f; };    // no decay with full-strength writes: the
    tc.beta = [](float) { return 1.0f; }; // WY system at its least damped
    run(tc);
}

TEST_P(CudaGdn, Qwen35BShape) {
    GdnCase tc;
    tc.Hv = 32;
    tc.rows = {500, 2};
    run(tc);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdn, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
