// The serving core's exactness on the CPU (serving_exactness.h): prefix-cache hits, batching
// and preemption give the solo greedy tokens and logprobs, on every HF fixture. The logprobs are
// compared on the reference ops (FP64 accumulation, every row computed alone): the fast path's
// BLAS picks other kernels for other row counts, so its logprobs move with the batch by more
// than a schedule preset; its greedy tokens are compared too. The int8 and fp8 KV caches are
// held to the same exactness.
#include <limits>

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

TEST_P(ServingExactness, PrefillOnlyWarmEqualsColdRunsReference) {
    check_prefill_only(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

// Quantized KV (--kv-dtype int8 | fp8): a hit reads the codes and scales the cold run wrote;
// the rows after its snapshot, batching and preemption compute codes again from f32 values that
// may differ in the last bit, so a code can flip by one quantum (kLogprobScheduleRecomputedKvAbs).
TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsInt8KvReference) {
    check_prefix_cache_exactness(reference("int8"), GetParam(),
                                 {kLogprobScheduleRecomputedKvAbs, 0});
}

TEST_P(ServingExactness, BatchedAndPreemptedRequestsEqualSoloRunsInt8KvReference) {
    check_batching_and_preemption(reference("int8"), GetParam(),
                                  {kLogprobScheduleRecomputedKvAbs, 0});
}

TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsFp8KvReference) {
    check_prefix_cache_exactness(reference("fp8"), GetParam(),
                                 {kLogprobScheduleRecomputedKvAbs, 0});
}

TEST_P(ServingExactness, PrefixCacheHitsEqualColdRunsFastTokens) {
    check_prefix_cache_exactness(EngineOptions{}, GetParam(), kIdsOnly);
}

TEST_P(ServingExactness, BatchedAndPreemptedRequestsEqualSoloRunsFastTokens) {
    check_batching_and_preemption(EngineOptions{}, GetParam(), kIdsOnly);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ServingExactness, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

// The near-tie rule of the bf16 CUDA comparisons (Comparison::near_tie): another id passes only
// where the reference ranks it within near_tie of its own choice, never a token it did not list
// or one it ranked clearly lower, and never without near_tie.
GeneratedToken token(int32_t id, double logprob, std::vector<std::pair<int32_t, double>> alts) {
    GeneratedToken t;
    t.id = id;
    t.logprob = float(logprob);
    for (const auto& [alt, lp] : alts) t.top_logprobs.push_back({alt, float(lp)});
    return t;
}

TEST(NearTie, AcceptsOnlyTheSameIdOrACloseAlternative) {
    const GeneratedToken want = token(69, -0.70, {{69, -0.70}, {138, -0.78}, {5, -2.5}});
    std::string why;
    EXPECT_TRUE(same_or_near_tie(token(69, -0.7, {}), want, 0.2, &why));
    EXPECT_TRUE(same_or_near_tie(token(138, -0.7, {}), want, 0.2, &why)); // 0.08 behind
    EXPECT_FALSE(same_or_near_tie(token(5, -0.7, {}), want, 0.2, &why));   // 1.8 behind
    EXPECT_NE(why.find("led it by"), std::string::npos) << why;
    EXPECT_FALSE(same_or_near_tie(token(7, -0.7, {}), want, 0.2, &why)); // not listed
    EXPECT_NE(why.find("not among"), std::string::npos) << why;
    EXPECT_FALSE(same_or_near_tie(token(138, -0.7, {}), want, 0.0, &why)); // exact comparison
    // Unbounded (a fixture chaotic in bf16): any listed alternative, still none unlisted.
    const double any = std::numeric_limits<double>::infinity();
    EXPECT_TRUE(same_or_near_tie(token(5, -0.7, {}), want, any, &why));
    EXPECT_FALSE(same_or_near_tie(token(7, -0.7, {}), want, any, &why));
}

} // namespace
} // namespace ninfer::test
