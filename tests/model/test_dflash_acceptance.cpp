// The demo model's DFlash2 acceptance on the CPU equals PyTorch's (dflash_acceptance.h), and the
// gate catches a drafter fault that leaves every output right: the selector's first two ranks
// swapped (the sabotage arm, NINFER_DFLASH_SABOTAGE=swap_ranks). Sampled requests accept more
// with the walk's sparse q than with one-hot drafts.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/hf_config.h"
#include "model/dflash_acceptance.h"

namespace ninfer::test {
namespace {

TEST(DFlashAcceptance, DemoModelMatchesPyTorch) {
    check_dflash_acceptance(EngineOptions{});
}

TEST(DFlashAcceptance, SwappedSelectorRanksAreCaught) {
    const MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0);
    setenv("NINFER_DFLASH_SABOTAGE", "swap_ranks", 1);
    const SpeculativeStats broken = measure_dflash_acceptance(EngineOptions{}, prompts, want);
    unsetenv("NINFER_DFLASH_SABOTAGE");
    ASSERT_GT(broken.rounds, 0);
    const double mean = double(broken.accepted) / double(broken.rounds);
    EXPECT_GT(std::fabs(mean - want.mean_accepted), kAcceptanceTolerance)
        << "swapped ranks still accept " << mean << " a round: the acceptance gate cannot see them";
}

// A shortlist of every id in another order proposes the full head's drafts: the acceptance is
// the full head's (a wrong id map would collapse it). A shortlist of the lowest half of the
// ids still lands drafts.
TEST(DFlashAcceptance, ShortlistedHeadMapsItsIdsBack) {
    MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0);
    if (prompts.prompts.size() > 16) prompts.prompts.resize(16);
    const int64_t V = io::load_hf_config(prompts.model_dir).vocab_size;
    const auto list = std::filesystem::temp_directory_path() / "ninfer_demo_shortlist.json";
    nlohmann::json ids = nlohmann::json::array();
    for (int64_t i = 0; i < V; ++i) ids.push_back((i * 2053) % V); // a permutation (2053 odd prime)
    std::ofstream(list) << ids.dump();
    auto mean = [&](const std::string& shortlist) {
        EngineOptions o;
        o.draft_shortlist = shortlist;
        const SpeculativeStats s = measure_dflash_acceptance(o, prompts, want);
        return s.rounds ? double(s.accepted) / double(s.rounds) : 0.0;
    };
    const double full = mean(""), permuted = mean(list.string()), half = mean(std::to_string(V / 2));
    std::printf("dflash2 demo: %.4f accepted a round (full head), %.4f (permuted shortlist), "
                "%.4f (ids below %lld)\n", full, permuted, half, static_cast<long long>(V / 2));
    EXPECT_NEAR(permuted, full, 0.01);
    EXPECT_GT(half, 0.5 * full);
}

// DFlash2's sampled walk keeps its 16-way q for the verifier's p/q rejection, which accepts
// sum min(p, q) a draft instead of a one-hot draft's p(d): at temperature 1 the demo drafter
// lands clearly more drafts a round that way (0.30 against 0.18 when measured). A q that does
// not reach the sampler, or a walk that ignores its temperature, loses that margin.
TEST(DFlashAcceptance, SparseProposalsRaiseSampledAcceptance) {
    MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0);
    if (prompts.prompts.size() > 16) prompts.prompts.resize(16); // enough rounds (~700 each)
    const double sparse = sampled_acceptance(EngineOptions{}, prompts, want, 1.0f, false);
    const double one_hot = sampled_acceptance(EngineOptions{}, prompts, want, 1.0f, true);
    std::printf("dflash2 demo, temperature 1: %.4f accepted a round with sparse q, %.4f one-hot\n",
                sparse, one_hot);
    EXPECT_GT(one_hot, 0.05);
    EXPECT_GT(sparse, 1.2 * one_hot);
}

} // namespace
} // namespace ninfer::test
