// The demo model's MTP acceptance on CUDA (f32 and bf16) equals PyTorch's (mtp_acceptance.h).
#include "cuda/cuda_test_util.h"
#include "model/mtp_acceptance.h"

namespace ninfer::test {
namespace {

TEST(CudaMtpAcceptance, DemoModelMatchesPyTorchF32) {
    check_mtp_acceptance(cuda_engine_options("f32"));
}

TEST(CudaMtpAcceptance, DemoModelMatchesPyTorchBf16) {
    check_mtp_acceptance(cuda_engine_options("bf16"));
}

} // namespace
} // namespace ninfer::test
