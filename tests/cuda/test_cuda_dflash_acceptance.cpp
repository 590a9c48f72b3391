// The demo model's DFlash2 acceptance on CUDA equals PyTorch's (dflash_acceptance.h): the
// drafter's CUDA ops, its context writes and its block proposals under graphs reproduce the
// reference drafter's choices; so does a shortlisted proposal head. f32 is held to the generated
// continuations as the CPU is; both precisions to the first round after fixed windows, each
// against PyTorch in its own precision (eval.json first_round and first_round_bf16), because
// bf16 text diverges from the f32 reference's: PyTorch's own bf16 lands 0.035 to 0.078 drafts a
// round off its f32 0.6367 over the continuations (0.6717 with every module in bf16, 0.7142
// loaded as transformers loads bf16; ninfer's bf16 gave 0.6577 there), and 0.013 off its 0.6696
// on the fixed windows (0.683), where ninfer's bf16 gave 0.6920 (H100, nineteenth session).
#include "cuda/cuda_test_util.h"
#include "model/dflash_acceptance.h"

namespace ninfer::test {
namespace {

TEST(CudaDFlashAcceptance, DemoModelMatchesPyTorchF32) {
    check_dflash_acceptance(cuda_engine_options("f32"));
}

TEST(CudaDFlashAcceptance, FirstRoundOnFixedWindowsMatchesPyTorchF32) {
    check_dflash_first_round(cuda_engine_options("f32"));
}

TEST(CudaDFlashAcceptance, FirstRoundOnFixedWindowsMatchesPyTorchBf16) {
    check_dflash_first_round(cuda_engine_options("bf16"));
}

// The shortlisted proposal head on CUDA (its rows gathered on the device): a permuted full list
// keeps the full head's acceptance.
TEST(CudaDFlashAcceptance, ShortlistedHeadMapsItsIdsBack) {
    check_shortlist_maps_ids_back(cuda_engine_options("f32"));
}

} // namespace
} // namespace ninfer::test
