// The sampling gate of speculative decoding (tests/model/test_speculative.cpp, test_dflash.cpp):
// seeded sampled requests with and without a drafter must give the same output distribution, by
// a two-sample chi-square test over the first three generated tokens.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "model/serving_exactness.h"

namespace ninfer::test {

// The first three generated tokens of n seeded sampled requests (4 tokens each: after the first,
// the rest leaves room for two drafts), as "a,b,c" counts; rounds counts the drafting rounds.
inline std::map<std::string, int> sample_triples(const EngineOptions& o, const std::vector<int32_t>& prompt,
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
inline double homogeneity_p_value(const std::map<std::string, int>& a, const std::map<std::string, int>& b) {
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

} // namespace ninfer::test
