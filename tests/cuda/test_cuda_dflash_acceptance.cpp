// The demo model's DFlash2 acceptance on CUDA (f32 and bf16) equals PyTorch's
// (dflash_acceptance.h): the drafter's CUDA ops, its context writes and its block proposals
// under graphs reproduce the reference drafter's choices.
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

} // namespace
} // namespace ninfer::test
