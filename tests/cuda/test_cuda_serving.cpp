// The serving core on CUDA (label cuda; serving_exactness.h): prefix-cache hits (GDN snapshot
// rows copied on the device, partial KV blocks copied on write), batching through the padded
// decode-graph buckets, and preemption. F32: the solo runs' greedy tokens, and for hits their
// logprobs within the schedule preset (batches of other sizes pick other GEMM and MoE routes,
// whose sums round differently, so batched logprobs are compared as tokens). BF16: the first
// token. A bf16 forward chunked or batched otherwise rounds each layer's activations at other
// points (measured on the H200: up to 0.09 in the logprobs of the alternatives), so where the
// solo run's first choice leads another candidate by less than kBf16ScheduleNearTie, either may
// come first; later tokens of a random tiny model fork at its near-ties. The logprobs of these
// code paths are the f32 tests' business. Open (2026-12-03, H200): moe_vlm_per_expert's batched
// and preempted runs choose id 138 where the solo run's 69 leads it by 3.0 nats, and only with
// the fused moe_block decode route (NINFER_FUSED_OFF=moe_block passes; the route's op tests do).
#include "cuda/cuda_test_util.h"
#include "model/serving_exactness.h"

namespace ninfer::test {
namespace {

EngineOptions on_cuda(const char* dtype) {
    return cuda_engine_options(dtype);
}

// The first token, or a near-tie of the solo run's (its logprob within kBf16ScheduleNearTie).
constexpr Comparison kBf16FirstToken{-1, 1, kBf16ScheduleNearTie};

class CudaServing : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaServing, F32PrefixCacheHitsEqualColdRuns) {
    check_prefix_cache_exactness(on_cuda("f32"), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(CudaServing, F32BatchedAndPreemptedRequestsEqualSoloRuns) {
    check_batching_and_preemption(on_cuda("f32"), GetParam(), kIdsOnly);
}

TEST_P(CudaServing, F32HostTierSnapshotsEqualColdRuns) {
    check_host_tier(on_cuda("f32"), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(CudaServing, Bf16PrefixCacheHitsGiveTheColdFirstToken) {
    check_prefix_cache_exactness(on_cuda("bf16"), GetParam(), kBf16FirstToken);
}

TEST_P(CudaServing, Bf16BatchedAndPreemptedRequestsGiveTheSoloFirstToken) {
    check_batching_and_preemption(on_cuda("bf16"), GetParam(), kBf16FirstToken);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaServing, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
