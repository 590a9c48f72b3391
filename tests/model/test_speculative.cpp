// Speculative decoding with the MTP head on the CPU (speculative_exactness.h), on the fixtures
// that carry mtp.* weights: greedy output equal to plain decoding for K = 1..8 and auto, batched,
// from the prefix cache and stopping inside drafted blocks; logprobs compared on the reference
// ops. Then the sampling gate: with MTP, seeded sampling keeps the plain output distribution
// (a two-sample chi-square test over many seeds), and a wrong acceptance rule (the sabotage arm,
// NINFER_SPEC_SABOTAGE=accept_drafts) fails that same test.
#include <cmath>
#include <cstdlib>
#include <map>

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

// The first three generated tokens of n seeded sampled requests (4 tokens each: after the first,
// the rest leaves room for two drafts), as "a,b,c" counts; rounds counts the drafting rounds.
std::map<std::string, int> sample_triples(const EngineOptions& o, const std::vector<int32_t>& prompt,
                                          uint64_t first_seed, int n, int64_t* rounds = nullptr) {
    Engine engine(o);
    std::map<std::string, int> counts;
    std::vector<GenerationRequest> batch;
    auto flush = [&] {
        std::vector<RequestStream> streams = engine.submit_all(batch);
        for (auto& s : streams) {
            std::vector<int32_t> ids;
            RequestUpdate u;
            while (s.next(u)) {
                for (const auto& t : u.tokens) ids.push_back(t.id);
                if (u.finished && rounds) *rounds += u.timings.speculative.rounds;
            }
            EXPECT_EQ(ids.size(), 4u);
            if (ids.size() == 4)
                ++counts[std::to_string(ids[0]) + "," + std::to_string(ids[1]) + "," +
                         std::to_string(ids[2])];
        }
        batch.clear();
    };
    for (int i = 0; i < n; ++i) {
        GenerationRequest r = greedy_request(prompt, 4, 0);
        r.sampling.greedy = false;
        r.sampling.temperature = 1.0f;
        r.sampling.top_k = 3; // few categories: the test has power at this sample size
        r.sampling.seed = first_seed + uint64_t(i);
        batch.push_back(r);
        if (batch.size() == 16) flush();
    }
    if (!batch.empty()) flush();
    return counts;
}

// The p-value of the two-sample chi-square homogeneity test (categories pooled until each
// expected count is at least 5), by the Wilson-Hilferty normal approximation.
double homogeneity_p_value(const std::map<std::string, int>& a, const std::map<std::string, int>& b) {
    std::map<std::string, std::pair<double, double>> cells;
    for (const auto& [k, v] : a) cells[k].first += v;
    for (const auto& [k, v] : b) cells[k].second += v;
    double na = 0, nb = 0;
    for (const auto& [k, c] : cells) {
        na += c.first;
        nb += c.second;
    }
    std::vector<std::pair<double, double>> pooled;
    std::pair<double, double> rest{0, 0};
    for (const auto& [k, c] : cells) {
        if ((c.first + c.second) * std::min(na, nb) / (na + nb) >= 5)
            pooled.push_back(c);
        else {
            rest.first += c.first;
            rest.second += c.second;
        }
    }
    if (rest.first + rest.second > 0) pooled.push_back(rest);
    double chi2 = 0;
    for (const auto& [x, y] : pooled) {
        const double t = x + y, ea = t * na / (na + nb), eb = t * nb / (na + nb);
        chi2 += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
    }
    const double df = double(pooled.size()) - 1;
    if (df < 1) return 1;
    const double z = (std::cbrt(chi2 / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
    return 0.5 * std::erfc(z / std::sqrt(2.0));
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
