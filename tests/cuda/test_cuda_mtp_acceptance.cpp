// The demo model's MTP acceptance on CUDA (f32 and bf16) equals PyTorch's (mtp_acceptance.h).
#include "cuda/cuda_test_util.h"
#include "model/mtp_acceptance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace ninfer::test {
namespace {

TEST(CudaMtpAcceptance, DemoModelMatchesPyTorchF32) {
    check_mtp_acceptance(cuda_engine_options("f32"));
}

TEST(CudaMtpAcceptance, DemoModelMatchesPyTorchBf16) {
    check_mtp_acceptance(cuda_engine_options("bf16"));
}

// Accepted drafts per drafted token, and the tokens, of greedy K = 3 continuations of the eval
// windows, all in flight at once (one verification group each).
struct SpecRun {
    double acceptance = 0;
    int64_t observe_replays = 0;
    std::vector<std::vector<int32_t>> tokens;
};
SpecRun run_continuations(const EngineOptions& options, const MtpEval& e) {
    Engine engine(options);
    std::vector<GenerationRequest> requests;
    for (size_t i = 0; i < std::min(e.prompts.size(), kMtpEvalBatch); ++i)
        requests.push_back(greedy_request(e.prompts[i], 96, 0));
    SpecRun r;
    for (auto& stream : engine.submit_all(requests)) {
        RequestUpdate u;
        r.tokens.emplace_back();
        while (stream.next(u))
            for (const auto& t : u.tokens) r.tokens.back().push_back(t.id);
    }
    const SpeculativeStats s = engine.stats().speculation;
    r.acceptance = double(s.accepted) / double(std::max<int64_t>(s.drafted, 1));
    r.observe_replays = engine.stats().observe_graph_replays;
    return r;
}

// The MTP alignment replayed from CUDA graphs after each verification step (observe_graphs.h)
// drafts as well as the eager alignment: on the demo model's trained head, the same tokens and
// acceptance within kAcceptanceTolerance, with the alignment graphs really replayed. The gate's
// own sabotage arm (NINFER_MTP_SABOTAGE=observe_unshifted: graphed rows embed the wrong token)
// must move acceptance past the tolerance, with the same tokens still.
TEST(CudaMtpAcceptance, AlignmentGraphsDraftAsWellAsEagerAlignment) {
    const MtpEval e = load_mtp_eval();
    ASSERT_FALSE(e.prompts.empty()) << "no mtp_eval.json in " << e.model_dir;
    EngineOptions o = with_mtp(cuda_engine_options("f32"), 3);
    o.model_dir = e.model_dir;
    EngineOptions eager_options = o;
    eager_options.cuda_graphs = false;
    const SpecRun eager = run_continuations(eager_options, e);
    const SpecRun graphs = run_continuations(o, e);
    ::setenv("NINFER_MTP_SABOTAGE", "observe_unshifted", 1);
    const SpecRun sabotaged = run_continuations(o, e);
    ::unsetenv("NINFER_MTP_SABOTAGE");
    EXPECT_EQ(eager.observe_replays, 0);
    EXPECT_GT(graphs.observe_replays, 0);
    EXPECT_GT(eager.acceptance, 0.5) << "the demo head should draft well";
    EXPECT_NEAR(graphs.acceptance, eager.acceptance, kAcceptanceTolerance);
    EXPECT_EQ(graphs.tokens, eager.tokens);
    EXPECT_GT(sabotaged.observe_replays, 0);
    EXPECT_GT(std::abs(sabotaged.acceptance - eager.acceptance), kAcceptanceTolerance)
        << "the sabotaged alignment should lower acceptance (eager " << eager.acceptance
        << ", sabotaged " << sabotaged.acceptance << ")";
    EXPECT_EQ(sabotaged.tokens, eager.tokens);
}

} // namespace
} // namespace ninfer::test
