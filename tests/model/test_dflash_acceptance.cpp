// The demo model's DFlash2 acceptance on the CPU equals PyTorch's (dflash_acceptance.h), and the
// gate catches a drafter fault that leaves every output right: the selector's first two ranks
// swapped (the sabotage arm, NINFER_DFLASH_SABOTAGE=swap_ranks).
#include <cmath>
#include <cstdlib>

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

} // namespace
} // namespace ninfer::test
