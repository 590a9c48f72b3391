// ops/sampling.h: sample_tokens' drafts, the p/q rejection of a draft proposed from a sparse
// distribution q (DFlash2's sampled walk). The gate: over many positions, with drafts drawn
// from q, the tokens follow p (chi-square goodness of fit) and the acceptance rate is
// sum min(p, q); a wrong residual at the same sample size fails the same test.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/philox.h"
#include "ops/op_test_util.h"
#include "ops/sampling.h"

namespace ninfer::test {
namespace {

using ops::SamplingParamsRow;

// A sparse q: ids and their probabilities.
struct SparseQ {
    std::vector<int32_t> ids;
    std::vector<float> q;
};

struct DraftBatch {
    Tensor logits, draft, ids, q;
    std::vector<SamplingParamsRow> params;
};

// N rows of the same logits at positions 0..N-1 of one seed; row r's draft is drawn from q by a
// generator of its own (as a drafter would, independently of the row's uniforms); every
// `plain_every`-th row has no draft (-1) when plain_every > 0.
DraftBatch draft_batch(const std::vector<float>& l, const SparseQ& sq, SamplingParamsRow p,
                       int64_t N, uint64_t seed, int plain_every = 0) {
    const int64_t V = int64_t(l.size()), k = int64_t(sq.ids.size());
    DraftBatch b{zeros({N, V}), zeros({N}, DType::I32), zeros({N, k}, DType::I32), zeros({N, k}),
                 {}};
    std::mt19937_64 gen(seed ^ 0x5eedull);
    std::discrete_distribution<int> pick(sq.q.begin(), sq.q.end());
    for (int64_t r = 0; r < N; ++r) {
        std::copy(l.begin(), l.end(), b.logits.ptr<float>() + r * V);
        std::copy(sq.ids.begin(), sq.ids.end(), b.ids.ptr<int32_t>() + r * k);
        std::copy(sq.q.begin(), sq.q.end(), b.q.ptr<float>() + r * k);
        const bool plain = plain_every > 0 && r % plain_every == 0;
        b.draft.ptr<int32_t>()[r] = plain ? -1 : sq.ids[size_t(pick(gen))];
        SamplingParamsRow row = p;
        row.seed = seed;
        row.position = r;
        b.params.push_back(row);
    }
    return b;
}

// A copy of a 1-D or 2-D host tensor.
Tensor copy_of(const Tensor& t) {
    const TensorView& v = t.view();
    Tensor c = v.ndim == 1 ? zeros({v.size(0)}, v.dtype) : zeros({v.size(0), v.size(1)}, v.dtype);
    std::memcpy(c.ptr<void>(), t.ptr<void>(), size_t(v.nbytes()));
    return c;
}

std::vector<int32_t> run(const ops::ExecContext& ctx, const DraftBatch& b, int64_t vocab_limit,
                         bool with_drafts = true) {
    const int64_t R = b.logits.size(0);
    Tensor tokens = zeros({R}, DType::I32), status = zeros({R}, DType::I32);
    for (int64_t r = 0; r < R; ++r) tokens.ptr<int32_t>()[r] = -7; // must be overwritten
    ops::SampleDrafts d;
    if (with_drafts) d = {b.draft, b.ids, b.q};
    ops::sample_tokens(ctx, b.logits, vocab_limit, b.params.data(), tokens, status, {}, {}, d);
    for (int64_t r = 0; r < R; ++r) EXPECT_EQ(status.ptr<int32_t>()[r], ops::kSampleOk);
    return std::vector<int32_t>(tokens.ptr<int32_t>(), tokens.ptr<int32_t>() + R);
}

// softmax(l / temperature) restricted to the top_k largest (top_k 0: all).
std::vector<double> target_p(const std::vector<float>& l, float temperature, int top_k) {
    std::vector<float> sorted = l;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const float cutoff = top_k > 0 ? sorted[size_t(top_k - 1)] : -INFINITY;
    std::vector<double> p;
    double sum = 0;
    for (float x : l) sum += x >= cutoff ? std::exp(double(x) / temperature) : 0.0;
    for (float x : l) p.push_back(x >= cutoff ? std::exp(double(x) / temperature) / sum : 0.0);
    return p;
}

// The p-value of the chi-square goodness of fit of token counts to p (cells with p = 0 must be
// empty: any token there gives 0), by the Wilson-Hilferty approximation.
double fit_p_value(const std::vector<int32_t>& tokens, const std::vector<double>& p) {
    const double N = double(tokens.size());
    double chi2 = 0;
    int cells = 0;
    for (size_t v = 0; v < p.size(); ++v) {
        const double n = double(std::count(tokens.begin(), tokens.end(), int32_t(v)));
        if (p[v] == 0) {
            if (n > 0) return 0;
            continue;
        }
        chi2 += (n - N * p[v]) * (n - N * p[v]) / (N * p[v]);
        ++cells;
    }
    const double df = cells - 1;
    if (df < 1) return 1;
    const double z = (std::cbrt(chi2 / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
    return 0.5 * std::erfc(z / std::sqrt(2.0));
}

double accepted_share(const std::vector<int32_t>& tokens, const DraftBatch& b) {
    double n = 0;
    for (size_t r = 0; r < tokens.size(); ++r) n += tokens[r] == b.draft.ptr<int32_t>()[r];
    return n / double(tokens.size());
}

double overlap(const std::vector<double>& p, const SparseQ& sq) { // sum min(p, q)
    double s = 0;
    for (size_t i = 0; i < sq.ids.size(); ++i) s += std::min(p[size_t(sq.ids[i])], double(sq.q[i]));
    return s;
}

const std::vector<float> kLogits{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 0.2f};

// q close to p on some ids, far on others, with mass on an id top_k removes from p.
const SparseQ kNearQ{{2, 5, 0, 4, 3}, {0.45f, 0.25f, 0.1f, 0.1f, 0.1f}};
// q concentrated where p is small.
const SparseQ kFarQ{{3, 6, 1}, {0.6f, 0.3f, 0.1f}};

TEST(SampleDrafts, TokensFollowPAndAcceptanceIsTheOverlap) {
    constexpr int64_t N = 40000;
    struct Setting {
        float temperature;
        int top_k;
        SparseQ q;
        const char* name;
    };
    const Setting settings[] = {{1.0f, 0, kNearQ, "near q"},
                                {0.7f, 4, kNearQ, "near q, top-k 4, temperature 0.7"},
                                {1.0f, 0, kFarQ, "far q"},
                                {1.0f, 0, {{2}, {1.0f}}, "one-hot q"}};
    uint64_t seed = 100;
    for (const Setting& s : settings) {
        SamplingParamsRow p;
        p.temperature = s.temperature;
        p.top_k = s.top_k;
        const DraftBatch b = draft_batch(kLogits, s.q, p, N, ++seed);
        const std::vector<int32_t> tokens = run(kFast, b, int64_t(kLogits.size()));
        const std::vector<double> want = target_p(kLogits, s.temperature, s.top_k);
        EXPECT_GT(fit_p_value(tokens, want), 1e-4) << s.name;
        const double a = overlap(want, s.q), se = std::sqrt(a * (1 - a) / N);
        EXPECT_NEAR(accepted_share(tokens, b), a, 5 * se + 1e-9) << s.name;
        EXPECT_EQ(tokens, run(kRef, b, int64_t(kLogits.size()))) << s.name << ": Fast vs Ref";
    }
}

// The gate's power: the same test at the same size on a plausible wrong rule (the residual
// drawn from p itself, q not subtracted; the uniforms are the op's) must fail.
TEST(SampleDrafts, TheGateCatchesAResidualThatForgetsQ) {
    constexpr int64_t N = 40000;
    SamplingParamsRow p;
    const DraftBatch b = draft_batch(kLogits, kNearQ, p, N, 200);
    const std::vector<double> want = target_p(kLogits, 1.0f, 0);
    std::vector<int32_t> wrong;
    for (int64_t r = 0; r < N; ++r) {
        const int32_t d = b.draft.ptr<int32_t>()[r];
        double qd = 0;
        for (size_t i = 0; i < kNearQ.ids.size(); ++i)
            if (kNearQ.ids[i] == d) qd = kNearQ.q[i];
        const double a = ops::uniform_from(b.params[size_t(r)].seed, r, ops::kDraftAcceptStream);
        if (a * qd < want[size_t(d)]) {
            wrong.push_back(d);
            continue;
        }
        const double u = ops::uniform_from(b.params[size_t(r)].seed, r);
        double run_sum = 0;
        int32_t t = int32_t(want.size()) - 1;
        for (size_t v = 0; v < want.size(); ++v)
            if ((run_sum += want[v]) > u) {
                t = int32_t(v);
                break;
            }
        wrong.push_back(t);
    }
    EXPECT_LT(fit_p_value(wrong, want), 1e-4);
    // and the op's own tokens at these very uniforms pass
    EXPECT_GT(fit_p_value(run(kFast, b, int64_t(kLogits.size())), want), 1e-4);
}

TEST(SampleDrafts, RowsWithoutADraftAndGreedyRowsSampleAsWithoutDrafts) {
    constexpr int64_t N = 600;
    SamplingParamsRow p;
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    DraftBatch b = draft_batch(kLogits, kNearQ, p, N, 300, /*plain_every=*/1); // no drafts
    EXPECT_EQ(run(kFast, b, 8), run(kFast, b, 8, false));
    b = draft_batch(kLogits, kNearQ, p, N, 301);
    for (auto& row : b.params) row.greedy = 1;
    EXPECT_EQ(run(kFast, b, 8), std::vector<int32_t>(size_t(N), 2)); // argmax, whatever q
    b = draft_batch(kLogits, kNearQ, p, N, 302);
    for (auto& row : b.params) row.temperature = 0.0f;
    EXPECT_EQ(run(kRef, b, 8), std::vector<int32_t>(size_t(N), 2));
}

// Hand-checked cases: a draft p covers more than q is always accepted, a draft outside p's
// support never is, and a rejected row never returns its draft.
TEST(SampleDrafts, AcceptsWhenPCoversQAndNeverReturnsARejectedDraft) {
    constexpr int64_t N = 2000;
    SamplingParamsRow p;
    p.top_k = 3; // p on ids {2, 5, 0}
    // q(2) = 0.1 < p(2) ~ 0.43: always accepted.
    DraftBatch b = draft_batch(kLogits, {{2, 3}, {0.1f, 0.9f}}, p, N, 400);
    const std::vector<int32_t> tokens = run(kFast, b, 8);
    for (int64_t r = 0; r < N; ++r) {
        const int32_t d = b.draft.ptr<int32_t>()[r];
        if (d == 2) {
            EXPECT_EQ(tokens[size_t(r)], 2) << "row " << r;
        } else {
            EXPECT_NE(tokens[size_t(r)], 3) << "row " << r; // d = 3: p(3) = 0
        }
        EXPECT_TRUE(tokens[size_t(r)] == 2 || tokens[size_t(r)] == 5 || tokens[size_t(r)] == 0);
    }
}

TEST(SampleDrafts, RejectsBadArguments) {
    SamplingParamsRow p;
    DraftBatch b = draft_batch(kLogits, kNearQ, p, 2, 500);
    std::vector<SamplingParamsRow> params = b.params;
    Tensor tokens = zeros({2}, DType::I32), status = zeros({2}, DType::I32);
    auto call = [&](const ops::SampleDrafts& d) {
        ops::sample_tokens(kFast, b.logits, 8, params.data(), tokens, status, {}, {}, d);
    };
    EXPECT_NO_THROW(call({b.draft, b.ids, b.q}));
    EXPECT_THROW(call({b.draft, b.ids, {}}), Error); // only some of the three
    EXPECT_THROW(call({b.draft, b.q, b.q}), Error);  // ids of the wrong dtype
    Tensor short_draft = zeros({1}, DType::I32);
    EXPECT_THROW(call({short_draft, b.ids, b.q}), Error);
    Tensor bad_ids = copy_of(b.ids); // a repeated id
    bad_ids.ptr<int32_t>()[1] = bad_ids.ptr<int32_t>()[0];
    EXPECT_THROW(call({b.draft, bad_ids, b.q}), Error);
    Tensor far_ids = copy_of(b.ids); // an id outside the vocabulary limit
    far_ids.ptr<int32_t>()[0] = 8;
    EXPECT_THROW(call({b.draft, far_ids, b.q}), Error);
    Tensor bad_q = copy_of(b.q); // q that is not a distribution
    bad_q.ptr<float>()[0] = 0.9f;
    EXPECT_THROW(call({b.draft, b.ids, bad_q}), Error);
    bad_q.ptr<float>()[0] = -0.45f;
    EXPECT_THROW(call({b.draft, b.ids, bad_q}), Error);
    Tensor bad_draft = copy_of(b.draft);
    bad_draft.ptr<int32_t>()[0] = 9;
    EXPECT_THROW(call({bad_draft, b.ids, b.q}), Error);
}

TEST(UniformFrom, StreamsAreIndependentDrawsAtOnePosition) {
    EXPECT_EQ(ops::uniform_from(7, 11), ops::uniform_from(7, 11, ops::kSampleStream));
    EXPECT_NE(ops::uniform_from(7, 11, ops::kSampleStream),
              ops::uniform_from(7, 11, ops::kDraftAcceptStream));
    EXPECT_NE(ops::uniform_from(7, 11, ops::kDraftAcceptStream),
              ops::uniform_from(7, 11, ops::kDraftProposalStream));
    // Stream 0 is the generator as it was: the known answer of philox_uniform(0, 0).
    EXPECT_EQ(ops::uniform_from(0, 0), philox_uniform(0, 0));
    double mean = 0;
    for (int i = 0; i < 4000; ++i) mean += ops::uniform_from(3, i, ops::kDraftAcceptStream);
    EXPECT_NEAR(mean / 4000, 0.5, 0.03);
}

} // namespace
} // namespace ninfer::test
