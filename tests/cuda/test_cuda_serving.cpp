// The serving core on CUDA (label cuda; serving_exactness.h): prefix-cache hits (GDN snapshot
// rows copied on the device, partial KV blocks copied on write), batching through the padded
// decode-graph buckets, and preemption. F32: the solo runs' greedy tokens, and for hits their
// logprobs within the schedule preset (batches of other sizes pick other GEMM and MoE routes,
// whose sums round differently, so batched logprobs are compared as tokens). BF16: the first
// token. A bf16 forward chunked or batched otherwise rounds each layer's activations at other
// points (measured on the H200: up to 0.09 in the logprobs of the alternatives), so where the
// solo run's first choice leads another candidate by less than kBf16ScheduleNearTie, either may
// come first; later tokens of a random tiny model fork at its near-ties. The logprobs of these
// code paths are the f32 tests' business. moe_vlm_per_expert is chaotic in bf16 (HF's own bf16
// logits deviate by 40% of their range): there a batched first token 3.0 nats behind the solo
// run's came first (2026-12-03, H200; with NINFER_FUSED_OFF=moe_block both runs take the same MoE
// route and agree), so it is held to kBf16ChaoticFixtureRel's weaker check.
#include <limits>

#include "cuda/cuda_test_util.h"
#include "model/serving_exactness.h"

namespace ninfer::test {
namespace {

EngineOptions on_cuda(const char* dtype) {
    return cuda_engine_options(dtype);
}

// The first token, or a near-tie of the solo run's (its logprob within kBf16ScheduleNearTie); on
// a fixture that is chaotic in bf16 (kBf16ChaoticFixtureRel), any of the solo run's listed
// alternatives.
Comparison bf16_first_token(const Fixture& f) {
    const bool chaotic = f.hf_bf16_logits_rel > kBf16ChaoticFixtureRel;
    return {-1, 1, chaotic ? std::numeric_limits<double>::infinity() : kBf16ScheduleNearTie};
}

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
    check_prefix_cache_exactness(on_cuda("bf16"), GetParam(), bf16_first_token(GetParam()));
}

TEST_P(CudaServing, Bf16BatchedAndPreemptedRequestsGiveTheSoloFirstToken) {
    check_batching_and_preemption(on_cuda("bf16"), GetParam(), bf16_first_token(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaServing, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
