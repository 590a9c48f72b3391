// Speculative decoding with the MTP head on CUDA (label cuda; speculative_exactness.h), on the
// fixtures with mtp.* weights, in f32: greedy tokens equal to plain decoding for K = 1..8 and
// auto (the per-row GDN snapshots of the conv and recurrent kernels restore rejected columns),
// batched, from the prefix cache, and stopping inside drafted blocks. Verification runs 1 + K
// rows per sequence where plain decoding runs one, so other GEMM routes round differently:
// tokens are compared, as for CUDA batching (test_cuda_serving.cpp).
#include "cuda/cuda_test_util.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

class CudaMtp : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaMtp, F32GreedyAloneEqualsPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("f32"), GetParam(), kIdsOnly);
}

TEST_P(CudaMtp, F32BatchedAndCachedEqualPlainDecoding) {
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam(), 3, kIdsOnly);
    check_mtp_batched_and_cached(cuda_engine_options("f32"), GetParam(), 0, kIdsOnly);
}

TEST_P(CudaMtp, F32StopsInsideDraftedBlocks) {
    check_mtp_stops_inside_blocks(cuda_engine_options("f32"), GetParam());
}

TEST_P(CudaMtp, Bf16GreedyFirstTokensEqualPlainDecoding) {
    check_mtp_greedy_alone(cuda_engine_options("bf16"), GetParam(), {-1, 1});
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaMtp, ::testing::ValuesIn(mtp_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(CudaMtp, FixturesWithMtpExist) {
    ASSERT_GE(mtp_fixtures().size(), 2u);
}

} // namespace
} // namespace ninfer::test
