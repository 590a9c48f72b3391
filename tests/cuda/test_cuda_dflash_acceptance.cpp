// The demo model's DFlash2 acceptance on CUDA (f32 and bf16) equals PyTorch's
// (dflash_acceptance.h): the drafter's CUDA ops, its context writes and its block proposals
// under graphs reproduce the reference drafter's choices; so does a shortlisted proposal head.
#include "cuda/cuda_test_util.h"
#include "model/dflash_acceptance.h"

namespace ninfer::test {
namespace {

TEST(CudaDFlashAcceptance, DemoModelMatchesPyTorchF32) {
    check_dflash_acceptance(cuda_engine_options("f32"));
}

TEST(CudaDFlashAcceptance, DemoModelMatchesPyTorchBf16) {
    check_dflash_acceptance(cuda_engine_options("bf16"));
}

// The shortlisted proposal head on CUDA (its rows gathered on the device): a permuted full list
// keeps the full head's acceptance.
TEST(CudaDFlashAcceptance, ShortlistedHeadMapsItsIdsBack) {
    check_shortlist_maps_ids_back(cuda_engine_options("f32"));
}

} // namespace
} // namespace ninfer::test
