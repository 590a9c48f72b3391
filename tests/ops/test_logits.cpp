// ops/logits.h: logprobs_top_k against a hand-computed log-softmax; ties, padding, k = 0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/logits.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

struct TopK {
    Tensor lse, ids, logprobs;
};

TopK top_k(const ops::ExecContext& ctx, const Tensor& logits, int64_t vocab_limit, int64_t k) {
    const int64_t R = logits.size(0);
    TopK out{zeros({R}), zeros({R, k}, DType::I32), zeros({R, k})};
    ops::logprobs_top_k(ctx, logits, vocab_limit, out.lse, out.ids, out.logprobs);
    return out;
}

TEST(LogprobsTopK, HandComputedLogSoftmax) {
    Tensor logits = f32_tensor({1, 4}, {1.0f, 2.0f, 3.0f, 4.0f});
    const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
    for (const auto& ctx : {kRef, kFast}) {
        TopK r = top_k(ctx, logits, 4, 3);
        EXPECT_NEAR(r.lse.ptr<float>()[0], lse, 1e-6);
        EXPECT_EQ(floats(r.ids), (std::vector<float>{3, 2, 1}));
        EXPECT_NEAR(r.logprobs.ptr<float>()[0], 4.0 - lse, 1e-6);
        EXPECT_NEAR(r.logprobs.ptr<float>()[1], 3.0 - lse, 1e-6);
        EXPECT_NEAR(r.logprobs.ptr<float>()[2], 2.0 - lse, 1e-6);
    }
}

TEST(LogprobsTopK, TiesPickTheLowerId) {
    Tensor logits = f32_tensor({2, 5}, {5, 7, 7, 1, 7, 0, 0, 0, 0, 0});
    for (const auto& ctx : {kRef, kFast}) {
        TopK r = top_k(ctx, logits, 5, 4);
        EXPECT_EQ(floats(rows(r.ids, 0, 1)), (std::vector<float>{1, 2, 4, 0}));
        EXPECT_EQ(floats(rows(r.ids, 1, 1)), (std::vector<float>{0, 1, 2, 3}));
        EXPECT_NEAR(r.logprobs.ptr<float>()[4], -std::log(5.0), 1e-6); // uniform row
        EXPECT_NEAR(r.lse.ptr<float>()[1], std::log(5.0), 1e-6);
    }
}

// A broken model's NaN rows must not break the sort (a comparator that is no strict weak order
// is undefined behaviour): floats rank in the CUDA kernels' total order, +NaN above +inf,
// -NaN below -inf, +0 above -0.
TEST(LogprobsTopK, NonFiniteValuesRankInATotalOrder) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> row(300, 1.0f);
    row[7] = -nan, row[11] = nan, row[20] = -inf, row[42] = inf, row[50] = 2.0f;
    row[60] = -0.0f, row[61] = 0.0f;
    Tensor logits = f32_tensor({1, 300}, row);
    for (const auto& ctx : {kRef, kFast}) {
        TopK r = top_k(ctx, logits, 300, 4);
        EXPECT_EQ(floats(r.ids), (std::vector<float>{11, 42, 50, 0}));
        EXPECT_TRUE(std::isnan(r.lse.ptr<float>()[0]));
        TopK low = top_k(ctx, f32_tensor({1, 3}, {-0.0f, 0.0f, -nan}), 3, 3);
        EXPECT_EQ(floats(low.ids), (std::vector<float>{1, 0, 2}));
    }
}

TEST(LogprobsTopK, VocabLimitExcludesPaddingFromTopKButNotFromLse) {
    // Columns 4 and 5 are padding with the largest logits: never chosen, still in the sum.
    Tensor logits = f32_tensor({1, 6}, {0.5f, -1.0f, 2.0f, 1.0f, 9.0f, 8.0f});
    double sum = 0;
    for (int64_t v = 0; v < 6; ++v) sum += std::exp(double(logits.ptr<float>()[v]));
    for (const auto& ctx : {kRef, kFast}) {
        TopK r = top_k(ctx, logits, 4, 4);
        EXPECT_NEAR(r.lse.ptr<float>()[0], std::log(sum), 1e-6);
        EXPECT_EQ(floats(r.ids), (std::vector<float>{2, 3, 0, 1}));
        EXPECT_NEAR(r.logprobs.ptr<float>()[0], 2.0 - std::log(sum), 1e-6);
    }
}

TEST(LogprobsTopK, ZeroKWritesOnlyLse) {
    Tensor logits = random_tensor({3, 50}, 400, 3.0f);
    Tensor lse = zeros({3});
    ops::logprobs_top_k(kFast, logits, 50, lse, TensorView{}, TensorView{});
    TopK r = top_k(kRef, logits, 50, 1);
    EXPECT_TRUE(near(lse, r.lse, kExact));
    Tensor lse2 = zeros({3}), ids0 = zeros({3, 0}, DType::I32), lp0 = zeros({3, 0});
    ops::logprobs_top_k(kRef, logits, 50, lse2, ids0, lp0);
    EXPECT_TRUE(near(lse2, r.lse, kExact));
}

TEST(LogprobsTopK, ReferenceMatchesBruteForceOnRandomRows) {
    const int64_t R = 7, V = 3000, limit = 2900, k = 20;
    Tensor logits = random_tensor({R, V}, 401, 4.0f);
    for (int64_t i = 0; i < 200; ++i) // plant exact ties
        logits.ptr<float>()[(i * 37) % (R * V)] = 9.0f;
    TopK r = top_k(kRef, logits, limit, k);
    Tensor lse = zeros({R}), lp = zeros({R, k});
    for (int64_t row = 0; row < R; ++row) {
        const float* l = logits.ptr<float>() + row * V;
        double m = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; ++v) m = std::max(m, double(l[v]));
        for (int64_t v = 0; v < V; ++v) s += std::exp(double(l[v]) - m);
        lse.ptr<float>()[row] = float(m + std::log(s));
        std::vector<int32_t> order(static_cast<size_t>(limit), 0);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return l[a] > l[b]; });
        for (int64_t i = 0; i < k; ++i) {
            EXPECT_EQ(r.ids.ptr<int32_t>()[row * k + i], order[size_t(i)]) << row << " " << i;
            lp.ptr<float>()[row * k + i] = float(double(l[order[size_t(i)]]) - (m + std::log(s)));
        }
    }
    EXPECT_TRUE(near(r.lse, lse, kElementwiseF32));
    EXPECT_TRUE(near(r.logprobs, lp, kElementwiseF32));
}

TEST(LogprobsTopK, FastMatchesReferenceAcrossShapes) {
    for (int64_t R : {1, 3, 17}) {
        for (int64_t V : {8, 1000, 50000}) {
            for (int64_t k : {1, 5, 8}) {
                Tensor logits = random_tensor({R, V}, 402 + uint64_t(V), 3.0f);
                const int64_t limit = V > 8 ? V - 7 : V;
                TopK ref = top_k(kRef, logits, limit, k), fast = top_k(kFast, logits, limit, k);
                // Both modes share the f64 sum and the (logit, id) order: identical results.
                EXPECT_TRUE(near(fast.lse, ref.lse, kExact)) << "R=" << R << " V=" << V;
                EXPECT_TRUE(near(fast.ids, ref.ids, kExact))
                    << "R=" << R << " V=" << V << " k=" << k;
                EXPECT_TRUE(near(fast.logprobs, ref.logprobs, kExact)) << "R=" << R << " V=" << V;
            }
        }
    }
}

TEST(LogprobsTopK, PaddedLogitRows) {
    // Logit rows with a row stride beyond V (a view into a wider buffer).
    const int64_t R = 4, V = 100;
    Tensor wide = random_tensor({R, V + 28}, 403, 2.0f);
    TensorView logits = wide.view().narrow(1, 0, V);
    Tensor lse = zeros({R}), ids = zeros({R, 3}, DType::I32), lp = zeros({R, 3});
    ops::logprobs_top_k(kFast, logits, V, lse, ids, lp);
    TopK ref = top_k(kRef, clone(logits), V, 3);
    EXPECT_TRUE(near(lse, ref.lse, kExact));
    EXPECT_TRUE(near(ids, ref.ids, kExact));
}

TEST(LogprobsTopK, RejectsBadArguments) {
    Tensor logits = random_tensor({2, 10}, 404);
    Tensor lse = zeros({2}), ids = zeros({2, 3}, DType::I32), lp = zeros({2, 3});
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 0, lse, ids, lp), Error);
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 11, lse, ids, lp), Error);
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 2, lse, ids, lp), Error); // k > vocab_limit
    Tensor lse_bad = zeros({3});
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 10, lse_bad, ids, lp), Error);
    Tensor ids_f = zeros({2, 3});
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 10, lse, ids_f, lp), Error);
    Tensor lp_bad = zeros({2, 4});
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits, 10, lse, ids, lp_bad), Error);
    Tensor logits_f64 = zeros({2, 10}, DType::F64);
    EXPECT_THROW(ops::logprobs_top_k(kFast, logits_f64, 10, lse, ids, lp), Error);
}

} // namespace
} // namespace ninfer::test
