// The serving core on CUDA (label cuda; serving_exactness.h): prefix-cache hits (GDN snapshot
// rows copied on the device, partial KV blocks copied on write), batching through the padded
// decode-graph buckets, and preemption give the solo runs' greedy tokens; in f32 the logprobs
// too, within the schedule preset.
#include "cuda/cuda_test_util.h"
#include "model/serving_exactness.h"

namespace ninfer::test {
namespace {

EngineOptions on_cuda(const char* dtype) {
    return cuda_engine_options(dtype);
}

class CudaServing : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaServing, F32PrefixCacheHitsEqualColdRuns) {
    check_prefix_cache_exactness(on_cuda("f32"), GetParam(), kLogprobScheduleAbs);
}

TEST_P(CudaServing, F32BatchedAndPreemptedRequestsEqualSoloRuns) {
    check_batching_and_preemption(on_cuda("f32"), GetParam(), kLogprobScheduleAbs);
}

TEST_P(CudaServing, Bf16PrefixCacheHitsGiveTheColdTokens) {
    check_prefix_cache_exactness(on_cuda("bf16"), GetParam(), kIdsOnly);
}

TEST_P(CudaServing, Bf16BatchedAndPreemptedRequestsGiveTheSoloTokens) {
    check_batching_and_preemption(on_cuda("bf16"), GetParam(), kIdsOnly);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaServing, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
