// The demo model's MTP acceptance on the CPU equals PyTorch's (mtp_acceptance.h).
#include "model/mtp_acceptance.h"

namespace ninfer::test {
namespace {

TEST(MtpAcceptance, DemoModelMatchesPyTorch) {
    check_mtp_acceptance(EngineOptions{});
}

} // namespace
} // namespace ninfer::test
