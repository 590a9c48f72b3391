// ops/sampling.h: apply_penalties, sample_tokens and uniform_from.
#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "core/philox.h"
#include "ops/op_test_util.h"
#include "ops/sampling.h"

namespace ninfer::test {
namespace {

using ops::SamplingParamsRow;

struct Sampled {
    std::vector<int32_t> tokens, status;
};

Sampled sample(const ops::ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
               const std::vector<SamplingParamsRow>& params) {
    const int64_t R = logits.size(0);
    Tensor tokens = zeros({R}, DType::I32), status = zeros({R}, DType::I32);
    for (int64_t r = 0; r < R; ++r) tokens.ptr<int32_t>()[r] = -7; // must be overwritten
    ops::sample_tokens(ctx, logits, vocab_limit, params.data(), tokens, status);
    return {std::vector<int32_t>(tokens.ptr<int32_t>(), tokens.ptr<int32_t>() + R),
            std::vector<int32_t>(status.ptr<int32_t>(), status.ptr<int32_t>() + R)};
}

// R rows, each holding the same logits.
Tensor repeated_rows(const std::vector<float>& logits, int64_t R) {
    const int64_t V = int64_t(logits.size());
    Tensor t = zeros({R, V});
    for (int64_t r = 0; r < R; ++r) std::copy(logits.begin(), logits.end(), t.ptr<float>() + r * V);
    return t;
}

// Params for R rows at positions 0..R-1 of one request.
std::vector<SamplingParamsRow> positions(SamplingParamsRow p, int64_t R, uint64_t seed) {
    std::vector<SamplingParamsRow> params(static_cast<size_t>(R), p);
    for (int64_t r = 0; r < R; ++r) {
        params[size_t(r)].seed = seed;
        params[size_t(r)].position = r;
    }
    return params;
}

std::vector<float> log_probs(const std::vector<double>& p) {
    std::vector<float> l;
    for (double v : p) l.push_back(float(std::log(v)));
    return l;
}

// The contract of sample_tokens written out directly (brute-force thresholds) for one row.
int32_t contract_sample(const float* l, int64_t n, const SamplingParamsRow& sp) {
    if (sp.greedy || sp.temperature <= 0.0f)
        return int32_t(std::max_element(l, l + n) - l); // first maximum
    std::vector<double> s(static_cast<size_t>(n), 0.0);
    for (int64_t v = 0; v < n; ++v) s[size_t(v)] = double(l[v]) / double(sp.temperature);
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double cutoff = sp.top_k > 0 && sp.top_k < n ? sorted[size_t(sp.top_k - 1)] : -INFINITY;
    std::vector<double> p(static_cast<size_t>(n), 0.0);
    for (int64_t v = 0; v < n; ++v)
        if (s[size_t(v)] >= cutoff) p[size_t(v)] = std::exp(s[size_t(v)] - sorted[0]);
    auto mass_at_least = [&](double t) {
        double m = 0;
        for (double x : p) m += x >= t && x > 0 ? x : 0.0;
        return m;
    };
    if (sp.top_p < 1.0f) {
        // The largest threshold t among the kept probabilities whose mass {p >= t} >= top_p.
        std::vector<double> cand;
        for (double x : p)
            if (x > 0) cand.push_back(x);
        std::sort(cand.begin(), cand.end(), std::greater<>());
        const double total = mass_at_least(0.0);
        double t = cand.back();
        for (double c : cand)
            if (mass_at_least(c) >= double(sp.top_p) * total) {
                t = c;
                break;
            }
        for (double& x : p) x = x >= t ? x : 0.0;
    }
    if (sp.min_p > 0.0f) {
        const double floor = double(sp.min_p) * *std::max_element(p.begin(), p.end());
        for (double& x : p) x = x >= floor ? x : 0.0;
    }
    double total = 0;
    for (double x : p) total += x;
    const double target = ops::uniform_from(sp.seed, sp.position) * total;
    double running = 0;
    for (int64_t v = 0; v < n; ++v) {
        running += p[size_t(v)];
        if (p[size_t(v)] > 0 && running > target) return int32_t(v);
    }
    return -2; // unreachable for a valid row
}

// ---------------------------------------------------------------------------------------------
// uniform_from

TEST(UniformFrom, MatchesPhiloxKnownAnswer) {
    // Random123 known-answer vector: Philox4x32-10, counter 0 and key 0 give
    // 6627e8d5 e169c58d bc57ac4c 9b00dbd8; the uniform takes the top 53 bits of the first two.
    const auto r = philox4x32_10(0, 0);
    EXPECT_EQ(r[0], 0x6627e8d5u);
    EXPECT_EQ(r[1], 0xe169c58du);
    EXPECT_EQ(r[2], 0xbc57ac4cu);
    EXPECT_EQ(r[3], 0x9b00dbd8u);
    const uint64_t bits = (uint64_t(0x6627e8d5u) << 32 | 0xe169c58du) >> 11;
    EXPECT_EQ(ops::uniform_from(0, 0), double(bits) / 9007199254740992.0);
}

TEST(UniformFrom, RangeDeterminismAndMean) {
    const int64_t N = 20000;
    double sum = 0;
    std::set<double> distinct;
    for (int64_t i = 0; i < N; ++i) {
        const double u = ops::uniform_from(42, i);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        EXPECT_EQ(u, ops::uniform_from(42, i));
        sum += u;
        distinct.insert(u);
    }
    EXPECT_EQ(distinct.size(), size_t(N));
    EXPECT_NEAR(sum / N, 0.5, 5 * std::sqrt(1.0 / 12.0 / N)); // 5 standard errors
    EXPECT_NE(ops::uniform_from(42, 7), ops::uniform_from(43, 7));
    EXPECT_NE(ops::uniform_from(uint64_t(1) << 40, 7), ops::uniform_from(0, 7)); // high key bits
    EXPECT_NE(ops::uniform_from(1, int64_t(1) << 33), ops::uniform_from(1, 0));  // high counter
}

// ---------------------------------------------------------------------------------------------
// sample_tokens

TEST(SampleTokens, GreedyIsArgmaxWithLowerIdOnTies) {
    // Row 0: tie of 5 at ids 1 and 3; row 1: max at 2 but a padded column (5) holds more.
    Tensor logits =
        f32_tensor({3, 6}, {1, 5, 2, 5, 0, 0, 0, 1, 3, -1, 2, 9, -4, -3, -2, -2, -5, -2});
    std::vector<SamplingParamsRow> params(3);
    params[0].greedy = 1;
    params[1].temperature = 0.0f; // temperature 0 means greedy too
    params[2].greedy = 1;
    params[2].temperature = 0.7f;
    for (const auto& ctx : {kRef, kFast}) {
        Sampled s = sample(ctx, logits, 5, params);
        EXPECT_EQ(s.tokens, (std::vector<int32_t>{1, 2, 2}));
        EXPECT_EQ(s.status, (std::vector<int32_t>{ops::kSampleOk, ops::kSampleOk, ops::kSampleOk}));
    }
}

TEST(SampleTokens, NonFiniteLogitsGiveStatusAndNoToken) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    // clang-format off
    const std::vector<float> values{
        0,    nan, 1,   2,    // NaN
        0,    1,   inf, 2,    // +inf
        -inf, 1,   2,   3,    // -inf is non-finite too
        1,    2,   3,   4,    // fine
        nan,  nan, 0,   0,    // NaN, greedy
        1,    2,   3,   nan,  // NaN only in a padded column
    };
    // clang-format on
    Tensor logits = f32_tensor({6, 4}, values);
    std::vector<SamplingParamsRow> params(6);
    params[4].greedy = 1;
    for (const auto& ctx : {kRef, kFast}) {
        Sampled s = sample(ctx, logits, 3, params);
        const int32_t bad = ops::kSampleNonFinite, ok = ops::kSampleOk;
        EXPECT_EQ(s.status, (std::vector<int32_t>{bad, bad, bad, ok, bad, ok}));
        for (int r : {0, 1, 2, 4}) EXPECT_EQ(s.tokens[size_t(r)], -1) << r;
        for (int r : {3, 5}) {
            EXPECT_GE(s.tokens[size_t(r)], 0) << r;
            EXPECT_LT(s.tokens[size_t(r)], 3) << r;
        }
    }
}

TEST(SampleTokens, ChosenLogitsGatherTheSourceAtTheToken) {
    // Row 0 greedy, row 1 sampled, row 2 non-finite; the source differs from the sampled logits
    // (as raw logits differ from penalized ones) and is wider than vocab_limit.
    Tensor logits = f32_tensor({3, 4}, {0, 3, 1, 2, 1, 2, 0, 1, 1, INFINITY, 0, 0});
    Tensor source =
        f32_tensor({3, 5}, {10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 30, 31, 32, 33, 34});
    std::vector<SamplingParamsRow> params(3);
    params[0].greedy = 1;
    params[1].seed = 5;
    for (const auto& ctx : {kRef, kFast}) {
        Tensor tokens = zeros({3}, DType::I32), status = zeros({3}, DType::I32),
               chosen = zeros({3});
        ops::sample_tokens(ctx, logits, 4, params.data(), tokens, status, source, chosen);
        const int32_t* t = tokens.ptr<int32_t>();
        const float* c = chosen.ptr<float>();
        EXPECT_EQ(t[0], 1);
        EXPECT_EQ(c[0], 11.0f);
        ASSERT_GE(t[1], 0);
        EXPECT_EQ(c[1], 20.0f + float(t[1]));
        EXPECT_EQ(status.ptr<int32_t>()[2], ops::kSampleNonFinite);
        EXPECT_TRUE(std::isnan(c[2]));
        // Without the optional pair the tokens are the same.
        Sampled plain = sample(ctx, logits, 4, params);
        EXPECT_EQ(plain.tokens, std::vector<int32_t>(t, t + 3));
    }
}

TEST(SampleTokens, ChosenLogitsRejectBadArguments) {
    Tensor logits = random_tensor({2, 10}, 521);
    std::vector<SamplingParamsRow> params(2);
    Tensor tokens = zeros({2}, DType::I32), status = zeros({2}, DType::I32), chosen = zeros({2});
    auto call = [&](const TensorView& source, const TensorView& out) {
        ops::sample_tokens(kFast, logits, 10, params.data(), tokens, status, source, out);
    };
    EXPECT_THROW(call(logits, TensorView{}), Error); // one without the other
    EXPECT_THROW(call(TensorView{}, chosen), Error);
    Tensor narrow_source = zeros({2, 9}), short_source = zeros({1, 10});
    EXPECT_THROW(call(narrow_source, chosen), Error); // fewer columns than vocab_limit
    EXPECT_THROW(call(short_source, chosen), Error);
    Tensor chosen_bad = zeros({3}), chosen_i32 = zeros({2}, DType::I32);
    EXPECT_THROW(call(logits, chosen_bad), Error);
    EXPECT_THROW(call(logits, chosen_i32), Error);
    EXPECT_NO_THROW(call(logits, chosen));
}

TEST(SampleTokens, FastAndReferenceGiveIdenticalTokens) {
    const int64_t R = 600, V = 1000, limit = 990;
    Tensor logits = random_tensor({R, V}, 500, 3.0f);
    for (int64_t r = 0; r < R; r += 3) // every third row: coarse logits with many exact ties
        for (int64_t v = 0; v < V; ++v)
            logits.ptr<float>()[r * V + v] = std::round(logits.ptr<float>()[r * V + v]);
    std::mt19937_64 gen(501);
    auto pick = [&](auto... values) {
        const std::vector<std::common_type_t<decltype(values)...>> options{values...};
        return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(gen)];
    };
    std::vector<SamplingParamsRow> params(static_cast<size_t>(R));
    for (auto& p : params) {
        p.temperature = pick(0.3f, 0.7f, 1.0f, 1.5f);
        p.top_k = pick(0, 1, 5, 50, 2000);
        p.top_p = pick(1.0f, 0.95f, 0.5f, 0.1f);
        p.min_p = pick(0.0f, 0.05f, 0.3f);
        p.greedy = pick(0, 0, 0, 0, 0, 0, 0, 0, 0, 1);
        p.seed = gen();
        p.position = int64_t(gen() % 100000);
    }
    Sampled ref = sample(kRef, logits, limit, params), fast = sample(kFast, logits, limit, params);
    EXPECT_EQ(fast.tokens, ref.tokens);
    EXPECT_EQ(fast.status, ref.status);
    for (int64_t r = 0; r < R; ++r) {
        ASSERT_EQ(ref.status[size_t(r)], ops::kSampleOk);
        ASSERT_GE(ref.tokens[size_t(r)], 0);
        ASSERT_LT(ref.tokens[size_t(r)], limit);
        // Against the contract written out, thresholds by brute force.
        EXPECT_EQ(ref.tokens[size_t(r)],
                  contract_sample(logits.ptr<float>() + r * V, limit, params[size_t(r)]))
            << "row " << r;
    }
}

TEST(SampleTokens, DeterministicPerSeedAndPosition) {
    const int64_t V = 64, R = 200;
    Tensor flat = repeated_rows(std::vector<float>(V, 0.0f), R);
    SamplingParamsRow p;
    std::vector<SamplingParamsRow> params = positions(p, R, 99);
    for (const auto& ctx : {kRef, kFast}) {
        Sampled a = sample(ctx, flat, V, params), b = sample(ctx, flat, V, params);
        EXPECT_EQ(a.tokens, b.tokens); // replays exactly
        // Different positions draw differently: ~61 of 64 tokens expected among 200 draws.
        EXPECT_GT(std::set<int32_t>(a.tokens.begin(), a.tokens.end()).size(), size_t(45));
        // The same (seed, position) in different rows and batches gives the same token.
        std::vector<SamplingParamsRow> same(4, params[17]);
        Sampled c = sample(ctx, rows(flat, 0, 4), V, same);
        for (int32_t t : c.tokens) EXPECT_EQ(t, a.tokens[17]);
    }
    std::vector<SamplingParamsRow> other = positions(p, R, 100); // another seed
    Sampled a = sample(kFast, flat, V, params), o = sample(kFast, flat, V, other);
    int same_count = 0;
    for (int64_t r = 0; r < R; ++r) same_count += a.tokens[size_t(r)] == o.tokens[size_t(r)];
    EXPECT_LT(same_count, 20); // ~3 expected by chance
}

TEST(SampleTokens, TopKOneEqualsGreedy) {
    const int64_t R = 300, V = 500;
    Tensor logits = random_tensor({R, V}, 510, 2.0f);
    SamplingParamsRow p;
    p.temperature = 0.8f;
    p.top_k = 1;
    std::vector<SamplingParamsRow> params = positions(p, R, 511), greedy = params;
    for (auto& g : greedy) g.greedy = 1;
    for (const auto& ctx : {kRef, kFast})
        EXPECT_EQ(sample(ctx, logits, V, params).tokens, sample(ctx, logits, V, greedy).tokens);
}

// Sampled frequencies of N draws against probabilities p, within 5 standard errors each.
void expect_frequencies(const std::vector<int32_t>& tokens, const std::vector<double>& p) {
    const double N = double(tokens.size());
    for (size_t v = 0; v < p.size(); ++v) {
        const double f = double(std::count(tokens.begin(), tokens.end(), int32_t(v))) / N;
        const double se = std::sqrt(std::max(p[v] * (1 - p[v]), 1e-12) / N);
        EXPECT_NEAR(f, p[v], 5 * se) << "token " << v;
    }
}

std::vector<double> softmax(const std::vector<double>& l) {
    std::vector<double> p;
    double sum = 0;
    for (double x : l) sum += std::exp(x);
    for (double x : l) p.push_back(std::exp(x) / sum);
    return p;
}

TEST(SampleTokens, FrequenciesMatchSoftmax) {
    const int64_t N = 20000;
    const std::vector<float> l{1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
    Tensor logits = repeated_rows(l, N);
    SamplingParamsRow p;
    // Temperature 1.
    Sampled s = sample(kFast, logits, 5, positions(p, N, 1234));
    expect_frequencies(s.tokens, softmax({1.0, 0.0, 2.0, -1.0, 0.5}));
    // Temperature 0.5 sharpens: softmax(2 l).
    p.temperature = 0.5f;
    s = sample(kFast, logits, 5, positions(p, N, 1235));
    expect_frequencies(s.tokens, softmax({2.0, 0.0, 4.0, -2.0, 1.0}));
    // top_k = 3 renormalises over ids {0, 2, 4}.
    p.temperature = 1.0f;
    p.top_k = 3;
    s = sample(kFast, logits, 5, positions(p, N, 1236));
    std::vector<double> q = softmax({1.0, -INFINITY, 2.0, -INFINITY, 0.5});
    expect_frequencies(s.tokens, q);
}

// The set of tokens drawn over many positions.
std::set<int32_t> support(const std::vector<float>& l, SamplingParamsRow p, int64_t N = 2000) {
    Tensor logits = repeated_rows(l, N);
    Sampled s = sample(kRef, logits, int64_t(l.size()), positions(p, N, 77));
    EXPECT_EQ(s.tokens, sample(kFast, logits, int64_t(l.size()), positions(p, N, 77)).tokens);
    return std::set<int32_t>(s.tokens.begin(), s.tokens.end());
}

TEST(SampleTokens, TopPAndMinPExcludeTheTail) {
    // p = [0.3, 0.05, 0.5, 0.15] (ids out of probability order).
    const std::vector<float> l = log_probs({0.3, 0.05, 0.5, 0.15});
    SamplingParamsRow p;
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 1, 2, 3}));
    p.top_p = 0.7f; // 0.5 < 0.7 <= 0.5 + 0.3
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 2}));
    p.top_p = 0.85f;
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 2, 3}));
    p.top_p = 0.4f;
    EXPECT_EQ(support(l, p), (std::set<int32_t>{2}));
    p.top_p = 1.0f;
    p.min_p = 0.2f; // floor 0.1
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 2, 3}));
    p.min_p = 0.5f; // floor 0.25
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 2}));
    // Both: top-p 0.85 keeps {0, 2, 3}, then min-p 0.4 (floor 0.2) drops 3.
    p.top_p = 0.85f;
    p.min_p = 0.4f;
    EXPECT_EQ(support(l, p), (std::set<int32_t>{0, 2}));
    // Frequencies after top-p renormalise over the kept set: 0.3 / 0.8 and 0.5 / 0.8.
    SamplingParamsRow tp;
    tp.top_p = 0.7f;
    const int64_t N = 20000;
    Sampled s = sample(kFast, repeated_rows(l, N), 4, positions(tp, N, 4321));
    expect_frequencies(s.tokens, {0.375, 0.0, 0.625, 0.0});
}

TEST(SampleTokens, TopKKeepsTiesWithTheKthValue) {
    SamplingParamsRow p;
    p.top_k = 1;
    EXPECT_EQ(support({1, 2, 2, 0}, p), (std::set<int32_t>{1, 2}));
    p.top_k = 2;
    EXPECT_EQ(support({3, 1, 3, 3, 0}, p), (std::set<int32_t>{0, 2, 3}));
    p.top_k = 2;
    EXPECT_EQ(support({0, 5, 1, 4, -1}, p), (std::set<int32_t>{1, 3}));
}

TEST(SampleTokens, InverseCdfOverAscendingIds) {
    // Every draw equals the contract's token for u = uniform_from(seed, position).
    const std::vector<float> l{0.3f, -0.2f, 1.1f, 0.9f, -2.0f, 0.0f};
    for (SamplingParamsRow p : {SamplingParamsRow{}, SamplingParamsRow{0.8f, 4, 0.9f, 0.05f}}) {
        const int64_t N = 1000;
        std::vector<SamplingParamsRow> params = positions(p, N, 2024);
        Sampled s = sample(kFast, repeated_rows(l, N), 6, params);
        for (int64_t i = 0; i < N; ++i)
            ASSERT_EQ(s.tokens[size_t(i)], contract_sample(l.data(), 6, params[size_t(i)])) << i;
    }
}

TEST(SampleTokens, RejectsBadArguments) {
    Tensor logits = random_tensor({2, 10}, 520);
    std::vector<SamplingParamsRow> params(2);
    Tensor tokens = zeros({2}, DType::I32), status = zeros({2}, DType::I32);
    EXPECT_THROW(ops::sample_tokens(kFast, logits, 0, params.data(), tokens, status), Error);
    EXPECT_THROW(ops::sample_tokens(kFast, logits, 11, params.data(), tokens, status), Error);
    EXPECT_THROW(ops::sample_tokens(kFast, logits, 10, nullptr, tokens, status), Error);
    Tensor tokens_bad = zeros({3}, DType::I32), tokens_f = zeros({2});
    EXPECT_THROW(ops::sample_tokens(kFast, logits, 10, params.data(), tokens_bad, status), Error);
    EXPECT_THROW(ops::sample_tokens(kFast, logits, 10, params.data(), tokens_f, status), Error);
    Tensor logits_f64 = zeros({2, 10}, DType::F64);
    EXPECT_THROW(ops::sample_tokens(kFast, logits_f64, 10, params.data(), tokens, status), Error);
}

// ---------------------------------------------------------------------------------------------
// apply_penalties

struct Penalties {
    Tensor offsets, tokens, counts, in_prompt;
};

Penalties penalty_list(const std::vector<int32_t>& offsets, const std::vector<int32_t>& tokens,
                       const std::vector<int32_t>& counts, const std::vector<uint8_t>& in_prompt) {
    Penalties p{i32_tensor(offsets), i32_tensor(tokens), i32_tensor(counts),
                zeros({int64_t(in_prompt.size())}, DType::U8)};
    std::copy(in_prompt.begin(), in_prompt.end(), p.in_prompt.ptr<uint8_t>());
    return p;
}

void penalize(const ops::ExecContext& ctx, const Tensor& logits,
              const std::vector<SamplingParamsRow>& params, const Penalties& p) {
    ops::apply_penalties(ctx, logits, params.data(), p.offsets, p.tokens, p.counts, p.in_prompt);
}

TEST(ApplyPenalties, HandComputedSemantics) {
    // Row 0: repetition 2, frequency 0.5, presence 0.25 over
    //   token 0 (logit 2, output count 2):        2 / 2 - 0.5 * 2 - 0.25 = -0.25
    //   token 1 (logit -2, prompt only):          -2 * 2 = -4 (no frequency or presence)
    //   token 3 (logit 0.5, count 1, in prompt):  0.5 / 2 - 0.5 - 0.25 = -0.5
    // Row 1: no entries, untouched. Row 2: repetition 1 (off), presence 1 on token 4 (count 3),
    //   frequency 0; token 2 in the prompt only: unchanged.
    Tensor logits = f32_tensor({3, 5}, {2, -2, 1, 0.5f, 3, 1, 2, 3, 4, 5, 1, 1, 1, 1, 1});
    std::vector<SamplingParamsRow> params(3);
    params[0].repetition_penalty = 2.0f;
    params[0].frequency_penalty = 0.5f;
    params[0].presence_penalty = 0.25f;
    params[1].repetition_penalty = 3.0f;
    params[2].presence_penalty = 1.0f;
    Penalties p = penalty_list({0, 3, 3, 5}, {0, 1, 3, 4, 2}, {2, 0, 1, 3, 0}, {0, 1, 1, 0, 1});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor l = clone(logits);
        penalize(ctx, l, params, p);
        EXPECT_EQ(floats(l),
                  (std::vector<float>{-0.25f, -4, 1, -0.5f, 3, 1, 2, 3, 4, 5, 1, 1, 1, 1, 0}));
    }
}

TEST(ApplyPenalties, RepetitionDividesPositiveAndMultipliesNegative) {
    Tensor logits = f32_tensor({1, 4}, {3.0f, -3.0f, 0.0f, 6.0f});
    std::vector<SamplingParamsRow> params(1);
    params[0].repetition_penalty = 1.5f;
    Penalties p = penalty_list({0, 3}, {0, 1, 2}, {1, 0, 4}, {0, 1, 0});
    penalize(kRef, logits, params, p);
    EXPECT_EQ(floats(logits), (std::vector<float>{2.0f, -4.5f, 0.0f, 6.0f}));
}

TEST(ApplyPenalties, FastMatchesReference) {
    const int64_t R = 8, V = 300;
    Tensor logits = random_tensor({R, V}, 530, 3.0f);
    std::mt19937_64 gen(531);
    std::vector<int32_t> offsets{0}, tokens, counts;
    std::vector<uint8_t> prompt;
    std::vector<SamplingParamsRow> params(R);
    for (int64_t r = 0; r < R; ++r) {
        std::set<int32_t> seen;
        for (int i = 0; i < 40; ++i) seen.insert(int32_t(gen() % V));
        for (int32_t t : seen) {
            tokens.push_back(t);
            counts.push_back(int32_t(gen() % 4));
            prompt.push_back(uint8_t(gen() % 2));
        }
        offsets.push_back(int32_t(tokens.size()));
        params[size_t(r)].repetition_penalty = 1.0f + 0.1f * float(r);
        params[size_t(r)].frequency_penalty = 0.05f * float(r % 3);
        params[size_t(r)].presence_penalty = 0.3f * float(r % 2);
    }
    Penalties p = penalty_list(offsets, tokens, counts, prompt);
    Tensor ref = clone(logits), fast = clone(logits);
    penalize(kRef, ref, params, p);
    penalize(kFast, fast, params, p);
    EXPECT_TRUE(near(fast, ref, kExact));
    EXPECT_FALSE(near(ref, logits, kExact)); // something was penalised
}

TEST(ApplyPenalties, RejectsBadArguments) {
    Tensor logits = random_tensor({2, 10}, 540);
    std::vector<SamplingParamsRow> params(2);
    Penalties ok = penalty_list({0, 1, 2}, {3, 4}, {1, 1}, {0, 0});
    EXPECT_NO_THROW(penalize(kFast, logits, params, ok));
    Penalties out_of_range = penalty_list({0, 1, 2}, {3, 10}, {1, 1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, out_of_range), Error);
    Penalties negative = penalty_list({0, 1, 2}, {-1, 4}, {1, 1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, negative), Error);
    Penalties short_span = penalty_list({0, 1, 1}, {3, 4}, {1, 1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, short_span), Error);
    Penalties decreasing = penalty_list({0, 2, 1}, {3, 4}, {1, 1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, decreasing), Error);
    Penalties wrong_rows = penalty_list({0, 2}, {3, 4}, {1, 1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, wrong_rows), Error);
    Penalties counts_short = penalty_list({0, 1, 2}, {3, 4}, {1}, {0, 0});
    EXPECT_THROW(penalize(kFast, logits, params, counts_short), Error);
    Penalties prompt_i32 = ok;
    prompt_i32.in_prompt = zeros({2}, DType::I32);
    EXPECT_THROW(penalize(kFast, logits, params, prompt_i32), Error);
}

} // namespace
} // namespace ninfer::test
