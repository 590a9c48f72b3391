// Speculative decoding with the MTP head on CUDA (label cuda; speculative_exactness.h), on the
// fixtures with mtp.* weights, in f32: greedy tokens equal to plain decoding for K = 1..8 and
// auto (the per-row GDN snapshots of the conv and recurrent kernels restore rejected columns),
// batched, from the prefix cache, and stopping inside drafted blocks. Verification runs 1 + K
// rows per sequence where plain decoding runs one, so other GEMM routes round differently:
// tokens are compared, as for CUDA batching (test_cuda_serving.cpp).
#include "cuda/cuda_test_util.h"
#include "common/tolerance.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

class CudaMtp : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaMtp, F32GreedyAloneEqualsPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("f32"), GetParam(), kIdsOnly);
}

TEST_P(CudaMtp, F32BatchedAndCachedEqualPlainDecoding) {
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam(), 3, kIdsOnly);
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam(), 0, kIdsOnly);
}

TEST_P(CudaMtp, F32StopsInsideDraftedBlocks) {
    check_mtp_stops_inside_blocks(cuda_engine_options("f32"), GetParam());
}

TEST_P(CudaMtp, Bf16GreedyFirstTokensEqualPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("bf16"), GetParam(), {-1, 1});
}

// Verification steps replay CUDA graphs per (batch bucket, 1 + K), the draft chains per
// (bucket, K) and the MTP alignments per (bucket, rows), and compute what eager drafting and
// verification compute: alone (the same launch shapes: ids identical, logprobs within the
// schedule preset) and three requests at once (a bucket of 4 with one padding sequence: ids
// identical). The graph routes must really have run, and not without graphs (the alignment
// graphs' acceptance: test_cuda_mtp_acceptance.cpp).
TEST_P(CudaMtp, F32VerifyGraphsEqualEagerVerification) {
    const Fixture& f = GetParam();
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    const std::vector<int32_t> base = long_prompt(f, 120);
    for (int k : {1, 3}) {
        EngineOptions eager_options = with_mtp(o, k);
        eager_options.cuda_graphs = false;
        Engine eager(eager_options), graphs(with_mtp(o, k));
        const auto alone = greedy_request(prefix_of(base, 60), 32);
        expect_same_output(run_one(graphs, alone).tokens, run_one(eager, alone).tokens,
                           {kLogprobScheduleAbs, 0}, f.name + " alone " + k_name(k));
        EXPECT_GT(graphs.stats().graph_verify_replays, 0) << f.name << " " << k_name(k);
        EXPECT_GT(graphs.stats().draft_graph_replays, 0) << f.name << " " << k_name(k);
        EXPECT_GT(graphs.stats().observe_graph_replays, 0) << f.name << " " << k_name(k);
        EXPECT_EQ(eager.stats().graph_replays, 0) << f.name;
        EXPECT_EQ(eager.stats().draft_graph_replays, 0) << f.name;
        EXPECT_EQ(eager.stats().observe_graph_replays, 0) << f.name;
        const int64_t before = graphs.stats().graph_verify_replays;
        expect_same_batched(eager, graphs, base, f.name + " " + k_name(k));
        EXPECT_GT(graphs.stats().graph_verify_replays, before) << f.name << " batched";
    }
}

// Start-up captures (EngineOptions::graph_warmup) every graph the steps replay: plain decoding
// and auto drafting, alone and three requests at once (buckets 4, 2 and 1 as they finish), run
// no eager warm-up or capture after start-up, and give the tokens an engine that captures on
// first use gives (its warm-ups counted: the gate's other arm).
TEST_P(CudaMtp, StartUpCapturesTheGraphsStepsReplay) {
    const Fixture& f = GetParam();
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    const std::vector<int32_t> base = long_prompt(f, 120);
    for (int spec : {-1, 0}) { // plain decoding; auto drafting
        const std::string label = f.name + (spec < 0 ? " plain" : " auto");
        const EngineStats s =
            expect_start_up_capture(spec < 0 ? o : with_mtp(o, spec), base, label);
        if (spec == 0) {
            EXPECT_GT(s.graph_verify_replays, 0) << label;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaMtp, ::testing::ValuesIn(mtp_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(CudaMtp, FixturesWithMtpExist) {
    ASSERT_GE(mtp_fixtures().size(), 2u);
}

} // namespace
} // namespace ninfer::test
