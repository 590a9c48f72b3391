// The demo model's MTP acceptance on the CPU equals PyTorch's (mtp_acceptance.h).
#include "io/hf_config.h"
#include "model/mtp_acceptance.h"

namespace ninfer::test {
namespace {

TEST(MtpAcceptance, DemoModelMatchesPyTorch) {
    check_mtp_acceptance(EngineOptions{});
}

// Under tensor parallelism (2 CPU ranks): the MTP module's layers sharded, their KV in every
// rank's pools, the drafts from rank 0's whole head: the same acceptance as PyTorch's.
TEST(MtpAcceptance, TensorParallelDemoModelMatchesPyTorch) {
    EngineOptions o;
    o.tensor_parallel = 2;
    check_mtp_acceptance(o);
}

// The same under expert parallelism: the demo model's 16 experts, 8 whole a rank (the MTP
// layer's MoE too).
TEST(MtpAcceptance, ExpertParallelDemoModelMatchesPyTorch) {
    EngineOptions o;
    o.tensor_parallel = 2;
    o.expert_parallel = true;
    check_mtp_acceptance(o);
}

// --draft-shortlist N with MTP: drafts come from the first N rows of the head (a view). Every
// row in order is the full head exactly; the lower half of the ids keeps most drafts; greedy
// output equals plain decoding throughout.
TEST(MtpAcceptance, ShortlistOfTheFirstIdsKeepsTheDrafts) {
    MtpEval e = load_mtp_eval();
    ASSERT_FALSE(e.prompts.empty()) << "no mtp_eval.json in " << e.model_dir;
    if (e.prompts.size() > 8) e.prompts.resize(8);
    EngineOptions o;
    o.model_dir = e.model_dir;
    const int64_t V = io::load_hf_config(e.model_dir).vocab_size;
    Engine plain(o);
    auto stats = [&](const std::string& shortlist) {
        EngineOptions s = with_mtp(o, 3);
        s.draft_shortlist = shortlist;
        Engine spec(s);
        SpeculativeStats total;
        for (const auto& p : e.prompts) {
            const GenerationRequest r = greedy_request(p, 48, 0);
            const Generated got = run_one(spec, r);
            expect_same_output(got.tokens, run_one(plain, r).tokens, kIdsOnly,
                               "mtp shortlist '" + shortlist + "'");
            total.merge(got.timings.speculative);
        }
        return total;
    };
    const SpeculativeStats full = stats(""), every = stats(std::to_string(V)),
                           half = stats(std::to_string(V / 2));
    ASSERT_GT(full.accepted, 0);
    EXPECT_EQ(every.rounds, full.rounds);
    EXPECT_EQ(every.accepted, full.accepted);
    const double rate = double(full.accepted) / double(full.rounds),
                 half_rate = double(half.accepted) / double(std::max<int64_t>(half.rounds, 1));
    EXPECT_GT(half_rate, 0.5 * rate);
    std::printf("mtp demo: %.4f accepted a round (full head), %.4f (ids below %lld)\n", rate,
                half_rate, static_cast<long long>(V / 2));
}

} // namespace
} // namespace ninfer::test
