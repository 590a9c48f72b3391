// Speculative decoding with DFlash and DFlash2 drafters on CUDA (label cuda): random drafters in
// z-lab's layout (dflash_fixture.h) on every fixture, f32. Greedy tokens equal plain decoding for
// K = 1, 3, 7, 15 and auto, batched, from the prefix cache (the drafter's context is part of the
// cached KV blocks), stopping inside drafted blocks, and with verification graphs against eager
// verification (the feature taps are captured in the graphs). Tokens are compared, as for CUDA
// batching (test_cuda_serving.cpp): verification runs more rows than plain decoding.
#include <filesystem>

#include "cuda/cuda_test_util.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "model/dflash_fixture.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

struct Case {
    Fixture fixture;
    bool v2;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.fixture.name << (c.v2 ? " dflash2" : " dflash");
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const Fixture& f : load_fixtures())
        for (bool v2 : {false, true}) out.push_back({f, v2});
    return out;
}

Speculation dflash(const Fixture& f, bool v2) {
    const auto dir = scratch_path("ninfer_cuda_dflash_" + f.name + (v2 ? "_v2" : "_v1"));
    DrafterShape shape;
    shape.v2 = v2;
    shape.head_dim = 32; // the tensor-core shapes of real drafters are D = 128; 32 here
    write_random_drafter(dir, io::load_hf_config(f.dir), shape);
    Speculation s;
    s.method = v2 ? "dflash2" : "dflash";
    s.draft_model = dir.string();
    s.alone_ks = {1, 3, 7, 15, 0};
    s.stop_k = 7;
    return s;
}

class CudaDFlash : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDFlash, F32GreedyAloneEqualsPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("f32"), GetParam().fixture, kIdsOnly,
                           dflash(GetParam().fixture, GetParam().v2));
}

TEST_P(CudaDFlash, F32BatchedAndCachedEqualPlainDecoding) {
    const Speculation s = dflash(GetParam().fixture, GetParam().v2);
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam().fixture, 7, kIdsOnly, s);
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam().fixture, 2, kIdsOnly, s);
}

TEST_P(CudaDFlash, F32StopsInsideDraftedBlocks) {
    check_mtp_stops_inside_blocks(cuda_engine_options("f32"), GetParam().fixture,
                                  dflash(GetParam().fixture, GetParam().v2));
}

TEST_P(CudaDFlash, Bf16GreedyFirstTokensEqualPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("bf16"), GetParam().fixture, {-1, 1},
                           dflash(GetParam().fixture, GetParam().v2));
}

// Verification graphs write the feature taps inside the captured forward, and proposals replay
// graphs per (n, K) (dflash_propose_graphs.cpp): drafting from them gives what eager
// verification and proposal give (the same drafts and acceptance), and both graph routes must
// have run.
TEST_P(CudaDFlash, F32VerifyGraphsEqualEagerVerification) {
    const Fixture& f = GetParam().fixture;
    const Speculation s = dflash(f, GetParam().v2);
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    EngineOptions eager_options = with_spec(o, s, 3);
    eager_options.cuda_graphs = false;
    Engine eager(eager_options), graphs(with_spec(o, s, 3));
    const auto alone = greedy_request(prefix_of(long_prompt(f, 120), 60), 32);
    const Generated want = run_one(eager, alone), got = run_one(graphs, alone);
    expect_same_output(got.tokens, want.tokens, kIdsOnly, f.name + " graphs");
    EXPECT_EQ(got.timings.speculative.drafted, want.timings.speculative.drafted) << f.name;
    EXPECT_EQ(got.timings.speculative.accepted, want.timings.speculative.accepted) << f.name;
    EXPECT_GT(graphs.stats().graph_verify_replays, 0) << f.name;
    EXPECT_GT(graphs.stats().draft_graph_replays, 0) << f.name;
    EXPECT_EQ(eager.stats().graph_replays, 0) << f.name;
    EXPECT_EQ(eager.stats().draft_graph_replays, 0) << f.name;
}

// Start-up captures (EngineOptions::graph_warmup) the proposal graphs of every (n, K) a step
// may draft with, over padding sequences: fixed K and auto drafting, alone and three requests at
// once, run no eager warm-up or capture after start-up (target and drafter graphs alike), draft
// from replayed proposal graphs, and give the tokens an engine that captures on first use gives
// (its warm-ups counted: the gate's other arm).
TEST_P(CudaDFlash, StartUpCapturesTheProposalGraphs) {
    const Fixture& f = GetParam().fixture;
    const Speculation s = dflash(f, GetParam().v2);
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    const std::vector<int32_t> base = long_prompt(f, 120);
    for (int k : {3, 0}) {
        const std::string label = f.name + " " + k_name(k);
        EXPECT_GT(expect_start_up_capture(with_spec(o, s, k), base, label).draft_graph_replays, 0)
            << label;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaDFlash, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) {
                             const Case& c = param_info.param;
                             return c.fixture.name + (c.v2 ? "_dflash2" : "_dflash");
                         });

} // namespace
} // namespace ninfer::test
