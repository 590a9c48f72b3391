// The serving core's exactness on the CPU (serving_exactness.h): prefix-cache hits, batching
// and preemption give the solo greedy tokens and logprobs, on every HF fixture. The logprobs are
// compared on the reference ops (FP64 accumulation, every row computed alone): the fast path's
// BLAS picks other kernels for other row counts, so its logprobs move with the batch by more
// than a schedule preset; its greedy tokens are compared too. The int8 and fp8 KV caches are
// held to the same exactness.
#include "model/serving_exactness.h"

namespace ninfer::test {
namespace {

class ServingExactness : public ::testing::TestWithParam<Fixture> {};

EngineOptions reference(const char* kv_dtype = "bf16") {
    EngineOptions o;
    o.cpu_reference = true;
    o.kv_dtype = kv_dtype;
    return o;
}

TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsReference) {
    check_prefix_cache_exactness(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, BatchedAndPreemptedRequestsEqualSoloRunsReference) {
    check_batching_and_preemption(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, HostTierSnapshotsEqualColdRunsReference) {
    check_host_tier(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, CacheBoundarySnapshotsEqualColdRunsReference) {
    check_cache_boundary(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

// Quantized KV (--kv-dtype int8 | fp8): a hit reads the codes and scales the cold run wrote, and
// a preempted request recomputes the same codes, so the outputs stay identical.
TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsInt8KvReference) {
    check_prefix_cache_exactness(reference("int8"), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, BatchedAndPreemptedRequestsEqualSoloRunsInt8KvReference) {
    check_batching_and_preemption(reference("int8"), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsFp8KvReference) {
    check_prefix_cache_exactness(reference("fp8"), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsFastTokens) {
    check_prefix_cache_exactness(EngineOptions{}, GetParam(), kIdsOnly);
}

TEST_P(ServingExactness, BatchedAndPreemptedRequestsEqualSoloRunsFastTokens) {
    check_batching_and_preemption(EngineOptions{}, GetParam(), kIdsOnly);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ServingExactness, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
