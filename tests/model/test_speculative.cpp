// Speculative decoding with the MTP head on the CPU (speculative_exactness.h), on the fixtures
// that carry mtp.* weights: greedy output equal to plain decoding for K = 1..8 and auto, batched,
// from the prefix cache and stopping inside drafted blocks; logprobs compared on the reference
// ops. Then the sampling gate: with MTP, seeded sampling keeps the plain output distribution
// (a two-sample chi-square test over many seeds), and a wrong acceptance rule (the sabotage arm,
// NINFER_SPEC_SABOTAGE=accept_drafts) fails that same test.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "model/sampling_gate.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

EngineOptions reference() {
    EngineOptions o;
    o.cpu_reference = true;
    return o;
}

class MtpExactness : public ::testing::TestWithParam<Fixture> {};

TEST_P(MtpExactness, GreedyAloneEqualsPlainDecodingReference) {
    check_mtp_greedy_alone(reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

TEST_P(MtpExactness, GreedyAloneEqualsPlainDecodingFastTokens) {
    check_mtp_greedy_alone(EngineOptions{}, GetParam(), kIdsOnly);
}

TEST_P(MtpExactness, BatchedAndCachedEqualPlainDecodingReference) {
    check_mtp_batched_and_cached(reference(), GetParam(), 3, {kLogprobScheduleAbs, 0});
    check_mtp_batched_and_cached(reference(), GetParam(), 0, {kLogprobScheduleAbs, 0});
}

TEST_P(MtpExactness, StopsInsideDraftedBlocks) {
    check_mtp_stops_inside_blocks(EngineOptions{}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpExactness, ::testing::ValuesIn(mtp_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(MtpExactness, FixturesWithMtpExist) {
    ASSERT_GE(mtp_fixtures().size(), 2u); // the parameterised suite must not be empty
}

// A request that `adjust` derives from the plain greedy run's ids, decoded plainly and with MTP at
// K = 1 and 3: the same tokens (its sampling options act on every verified column as on a plain
// step). Returns the plain decoding of the adjusted request.
std::vector<int32_t> expect_mtp_equals_plain(
    const std::string& what,
    const std::function<void(GenerationRequest&, const std::vector<int32_t>&)>& adjust) {
    const Fixture f = mtp_fixtures().front();
    EngineOptions o;
    o.model_dir = f.dir;
    Engine plain(o);
    GenerationRequest r = greedy_request(prefix_of(long_prompt(f, 60), 60), 24);
    adjust(r, ids_of(run_one(plain, r).tokens));
    const Generated want = run_one(plain, r);
    for (int k : {1, 3}) {
        Engine spec(with_mtp(o, k));
        const Generated got = run_one(spec, r);
        expect_same_output(got.tokens, want.tokens, kIdsOnly,
                           f.name + " " + what + " K=" + std::to_string(k));
        EXPECT_GT(got.timings.speculative.rounds, 0);
    }
    return ids_of(want.tokens);
}

// logit_bias: a ban of the plain run's first three tokens and a push toward its sixth.
TEST(MtpExactness, LogitBiasEqualsPlainDecoding) {
    std::vector<int32_t> unbiased;
    const auto biased = expect_mtp_equals_plain("logit_bias", [&](auto& r, const auto& ids) {
        unbiased = ids;
        for (size_t i = 0; i < 3; ++i) r.sampling.logit_bias.push_back({ids[i], -100.0f});
        r.sampling.logit_bias.push_back({ids[5], 3.0f});
    });
    EXPECT_NE(biased, unbiased); // the biases act
}

// min_new_tokens: stop ids that would end the plain run at its 3rd token, held back to the 12th.
TEST(MtpExactness, MinNewTokensEqualsPlainDecoding) {
    const auto held = expect_mtp_equals_plain("min_new_tokens", [](auto& r, const auto& ids) {
        r.stop_token_ids = {ids[2], ids[6]};
        r.min_new_tokens = 12;
    });
    EXPECT_GE(held.size(), 12u);
}

TEST(MtpExactness, CheckpointWithoutMtpIsAClearError) {
    for (const Fixture& f : load_fixtures()) {
        if (f.name != "moe_text_fused") continue;
        EngineOptions o;
        o.model_dir = f.dir;
        try {
            Engine e(with_mtp(o, 2));
            FAIL() << "an engine with --spec mtp started on a checkpoint without mtp.*";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("no MTP weights"), std::string::npos) << e.what();
        }
        return;
    }
    FAIL() << "fixture moe_text_fused not found";
}

TEST(MtpSampling, KeepsTheOutputDistributionAndCatchesAWrongAcceptanceRule) {
    const std::vector<Fixture> fixtures = mtp_fixtures();
    ASSERT_FALSE(fixtures.empty());
    const Fixture& f = fixtures.front();
    EngineOptions o;
    o.model_dir = f.dir;
    o.prefix_cache = false;
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 24), 24);
    constexpr int kSamples = 1200;
    // Different seeds in the two arms: the test compares distributions, not coupled samples.
    const auto plain = sample_triples(o, prompt, 1, kSamples);
    int64_t rounds = 0;
    const auto spec = sample_triples(with_mtp(o, 3), prompt, 1000001, kSamples, &rounds);
    EXPECT_GE(rounds, kSamples) << "the MTP arm did not draft";
    const double p = homogeneity_p_value(plain, spec);
    EXPECT_GT(p, 1e-4) << "MTP sampling changed the output distribution (p = " << p << ")";
    // The sabotage arm: every draft accepted. The same gate must reject it.
    setenv("NINFER_SPEC_SABOTAGE", "accept_drafts", 1);
    const auto broken = sample_triples(with_mtp(o, 3), prompt, 2000001, kSamples);
    unsetenv("NINFER_SPEC_SABOTAGE");
    const double p_broken = homogeneity_p_value(plain, broken);
    EXPECT_LT(p_broken, 1e-4) << "the gate did not catch a wrong acceptance rule (p = " << p_broken
                              << ")";
}

} // namespace
} // namespace ninfer::test
