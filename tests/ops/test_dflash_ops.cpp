// ops/dflash.h on the CPU: grouped_dynamic_conv and dflash_select, the reference against naive
// loops written here (doubles), the fast path against the reference, argument checks.
// grouped_dynamic_conv: segments of different lengths with a one-row segment (tap 0 only: no
// history across blocks), an empty segment, dynamic as a column range of a wider projection.
// dflash_select: greedy (with an exact tie, which the lowest index wins) and sampling with u
// placed inside chosen candidates' intervals, over codebooks whose predecessor rows change the
// choices (checked: a walk that kept the anchor as predecessor would pick other paths).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/dflash.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

// ---- grouped_dynamic_conv ----

// A conv problem: x [T, H], dynamic a column range [T, taps G] of a [T, taps G + 11] tensor,
// base [taps, H].
struct Conv {
    int64_t T, H, taps, group_size;
    std::vector<int32_t> seg;
    Tensor x, wide, base;
    Conv(std::vector<int32_t> seg_, int64_t H_, int64_t taps_, int64_t gs, uint64_t seed)
        : T(seg_.back()), H(H_), taps(taps_), group_size(gs), seg(std::move(seg_)),
          x(random_tensor({T, H}, seed)), wide(random_tensor({T, taps * (H / gs) + 11}, seed + 1)),
          base(random_tensor({taps, H}, seed + 2)) {}
    TensorView dynamic() const { return wide.view().narrow(1, 4, taps * (H / group_size)); }

    Tensor run(const ops::ExecContext& ctx) const {
        Tensor out = zeros({T, H});
        fill_nan(out);
        ops::grouped_dynamic_conv(ctx, x, dynamic(), base, group_size, seg.data(), i32_tensor(seg),
                                  out);
        return out;
    }
    // The contract's sum, in doubles.
    Tensor naive() const {
        const int64_t G = H / group_size;
        const TensorView dyn = dynamic();
        Tensor out = zeros({T, H});
        for (size_t s = 0; s + 1 < seg.size(); ++s)
            for (int64_t t = seg[s]; t < seg[s + 1]; ++t)
                for (int64_t c = 0; c < H; ++c) {
                    double sum = 0;
                    for (int64_t o = 0; o < taps && o <= t - seg[s]; ++o)
                        sum += (double(base.ptr<float>()[o * H + c]) +
                                double(*dyn.at<float>(t, o * G + c / group_size))) *
                               double(x.ptr<float>()[(t - o) * H + c]);
                    out.ptr<float>()[t * H + c] = float(sum);
                }
        return out;
    }
};

TEST(GroupedDynamicConv, ReferenceMatchesNaive) {
    // Segments of 5 rows and 1 row (the second uses tap 0 only), taps 2, groups of 16 channels.
    const Conv cv({0, 5, 6}, 64, 2, 16, 1);
    const Tensor want = cv.naive(), ref = cv.run(kRef);
    EXPECT_TRUE(near(ref, want, kElementwiseF32));
    EXPECT_TRUE(near(cv.run(kFast), ref, kReductionF32));
    // Row 5 starts its block: (base[0] + dynamic[5, g]) * x[5] exactly, nothing from row 4.
    for (int64_t c = 0; c < cv.H; ++c) {
        const double w =
            double(cv.base.ptr<float>()[c]) + double(*cv.dynamic().at<float>(5, c / cv.group_size));
        EXPECT_EQ(ref.ptr<float>()[5 * cv.H + c], float(w * cv.x.ptr<float>()[5 * cv.H + c]));
    }
}

TEST(GroupedDynamicConv, SegmentsDoNotShareHistory) {
    // Running each segment alone gives the same rows as the batched call (bit for bit), and an
    // empty segment changes nothing.
    const Conv cv({0, 3, 3, 10, 11, 17}, 48, 3, 8, 2);
    for (const auto& ctx : {kRef, kFast}) {
        const Tensor all = cv.run(ctx);
        EXPECT_TRUE(near(all, cv.naive(), kReductionF32));
        for (size_t s = 0; s + 1 < cv.seg.size(); ++s) {
            const int64_t r0 = cv.seg[s], n = cv.seg[s + 1] - cv.seg[s];
            if (n == 0) continue;
            const std::vector<int32_t> one{0, int32_t(n)};
            Tensor alone = zeros({n, cv.H});
            ops::grouped_dynamic_conv(ctx, rows(cv.x, r0, n), rows(cv.dynamic(), r0, n), cv.base,
                                      cv.group_size, one.data(), i32_tensor(one), alone);
            EXPECT_TRUE(near(rows(all, r0, n), alone, kExact)) << "segment " << s;
        }
    }
}

TEST(GroupedDynamicConv, FastMatchesReferenceManySegments) {
    std::mt19937 gen(3);
    std::vector<int32_t> seg{0};
    std::uniform_int_distribution<int> len(1, 16);
    for (int s = 0; s < 12; ++s) seg.push_back(seg.back() + len(gen));
    const Conv cv(seg, 256, 4, 16, 4);
    const Tensor ref = cv.run(kRef);
    EXPECT_TRUE(near(ref, cv.naive(), kElementwiseF32));
    EXPECT_TRUE(near(cv.run(kFast), ref, kReductionF32));
}

TEST(GroupedDynamicConv, RejectsBadArguments) {
    const Conv cv({0, 5, 6}, 64, 2, 16, 5);
    Tensor out = zeros({6, 64});
    auto call = [&](const std::vector<int32_t>& seg, int64_t gs, const TensorView& dyn,
                    const TensorView& o) {
        ops::grouped_dynamic_conv(kFast, cv.x, dyn, cv.base, gs, seg.data(), i32_tensor(seg), o);
    };
    EXPECT_NO_THROW(call({0, 5, 6}, 16, cv.dynamic(), out));
    EXPECT_THROW(call({0, 5, 7}, 16, cv.dynamic(), out), Error);    // does not end at T
    EXPECT_THROW(call({1, 5, 6}, 16, cv.dynamic(), out), Error);    // does not start at 0
    EXPECT_THROW(call({0, 5, 4, 6}, 16, cv.dynamic(), out), Error); // decreasing
    EXPECT_THROW(call({0, 6}, 12, cv.dynamic(), out), Error);       // 12 does not divide 64
    EXPECT_THROW(call({0, 6}, 0, cv.dynamic(), out), Error);
    EXPECT_THROW(call({0, 6}, 8, cv.dynamic(), out), Error); // dynamic has 2 x 4 groups, not 2 x 8
    EXPECT_THROW(call({0, 6}, 16, cv.wide, out), Error);     // dynamic too wide
    EXPECT_THROW(call({0, 6}, 16, cv.dynamic(), cv.x), Error); // out aliases x
    Tensor wide_out = zeros({6, 80});
    EXPECT_THROW(call({0, 6}, 16, cv.dynamic(), wide_out.view().narrow(1, 0, 64)), Error);
    const std::vector<int32_t> seg{0, 6};
    EXPECT_THROW(ops::grouped_dynamic_conv(kFast, cv.x, cv.dynamic(), cv.base, 16, nullptr,
                                           i32_tensor(seg), out),
                 Error);
    Tensor base0 = zeros({0, 64});
    EXPECT_THROW(ops::grouped_dynamic_conv(kFast, cv.x, cv.dynamic().narrow(1, 0, 0), base0, 16,
                                           seg.data(), i32_tensor(seg), out),
                 Error); // no taps
}

// ---- dflash_select ----

// One proposal: B sequences, K positions, k candidates, codebooks [V, R].
struct Select {
    int64_t B, K, k, R, V;
    Tensor unary, cand, g, P, S, anchor, u;
    Select(int64_t B_, int64_t K_, int64_t k_, int64_t R_, int64_t V_, uint64_t seed)
        : B(B_), K(K_), k(k_), R(R_), V(V_), unary(random_tensor({B_, K_, k_}, seed, 0.5f)),
          cand(zeros({B_, K_, k_}, DType::I32)), g(random_tensor({B_, K_, R_}, seed + 1)),
          // Entries of size R^-1/4: the sum over r has unit scale at any R, as the unary
          // terms, so the predecessor's row moves the scores as much as the unary terms do.
          P(random_tensor({V_, R_}, seed + 2, float(std::pow(double(R_), -0.25)))),
          S(random_tensor({V_, R_}, seed + 3, float(std::pow(double(R_), -0.25)))),
          anchor(zeros({B_}, DType::I32)), u(zeros({B_, K_})) {
        std::mt19937 gen(static_cast<uint32_t>(seed));
        std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
        for (int64_t i = 0; i < cand.numel(); ++i) cand.ptr<int32_t>()[i] = id(gen);
        for (int64_t b = 0; b < B; ++b) anchor.ptr<int32_t>()[b] = id(gen);
    }
    int32_t cand_at(int64_t b, int64_t i, int64_t c) const {
        return cand.ptr<int32_t>()[(b * K + i) * k + c];
    }

    struct Out {
        Tensor path, q;
    };
    Out run(const ops::ExecContext& ctx, float temperature) const {
        Out o{zeros({B, K}, DType::I32), zeros({B, K, k})};
        fill_nan(o.q);
        ops::dflash_select(ctx, unary, cand, g, P, S, anchor, u, temperature, o.path, o.q);
        return o;
    }

    // e[c] at (b, i) for predecessor pred, in doubles.
    std::vector<double> scores(int64_t b, int64_t i, int32_t pred) const {
        std::vector<double> e(static_cast<size_t>(k));
        for (int64_t c = 0; c < k; ++c) {
            double dot = 0;
            for (int64_t r = 0; r < R; ++r)
                dot += double(P.ptr<float>()[pred * R + r]) *
                       double(g.ptr<float>()[(b * K + i) * R + r]) *
                       double(S.ptr<float>()[cand_at(b, i, c) * R + r]);
            e[c] = double(unary.ptr<float>()[(b * K + i) * k + c]) + dot;
        }
        return e;
    }
    static std::vector<double> softmax(const std::vector<double>& e, double temperature) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double v : e) mx = std::max(mx, v / temperature);
        std::vector<double> p;
        for (double v : e) sum += p.emplace_back(std::exp(v / temperature - mx));
        for (double& v : p) v /= sum;
        return p;
    }
    // The walk of the contract. frozen: keep the anchor as every position's predecessor (the
    // mistake the tests must catch).
    Out naive(float temperature, bool frozen = false) const {
        Out o{zeros({B, K}, DType::I32), zeros({B, K, k})};
        for (int64_t b = 0; b < B; ++b) {
            int32_t pred = anchor.ptr<int32_t>()[b];
            for (int64_t i = 0; i < K; ++i) {
                const std::vector<double> e = scores(b, i, pred);
                float* q = o.q.ptr<float>() + (b * K + i) * k;
                int64_t j = 0;
                if (temperature > 0) {
                    const std::vector<double> p = softmax(e, temperature);
                    double prefix = 0;
                    j = -1;
                    for (int64_t c = 0; c < k; ++c) {
                        q[c] = float(p[c]);
                        prefix += p[c];
                        if (j < 0 && prefix > double(u.ptr<float>()[b * K + i])) j = c;
                    }
                    if (j < 0) j = k - 1;
                } else {
                    for (int64_t c = 1; c < k; ++c)
                        if (e[c] > e[j]) j = c;
                    for (int64_t c = 0; c < k; ++c) q[c] = c == j ? 1.0f : 0.0f;
                }
                o.path.ptr<int32_t>()[b * K + i] = cand_at(b, i, j);
                if (!frozen) pred = cand_at(b, i, j);
            }
        }
        return o;
    }

    // Sets u so that each position (b, i) of the walk picks a chosen candidate: from
    // `preferred(b, i)` on (cyclically), the first whose probability is at least 0.02, with u in
    // the middle of its interval of the prefix sums (far from the f32 rounding of both ends).
    // The intervals are built along the walk, since each position's q depends on the previous
    // pick. Returns the chosen candidate indices [B * K].
    template <typename Preferred> std::vector<int64_t> aim(float temperature, Preferred preferred) {
        std::vector<int64_t> chosen;
        for (int64_t b = 0; b < B; ++b) {
            int32_t pred = anchor.ptr<int32_t>()[b];
            for (int64_t i = 0; i < K; ++i) {
                const std::vector<double> p = softmax(scores(b, i, pred), temperature);
                int64_t j = preferred(b, i) % k;
                while (p[j] < 0.02) j = (j + 1) % k; // some p is >= 1 / k
                double below = 0;
                for (int64_t c = 0; c < j; ++c) below += p[c];
                u.ptr<float>()[b * K + i] = float(below + p[j] / 2);
                chosen.push_back(j);
                pred = cand_at(b, i, j);
            }
        }
        return chosen;
    }
};

bool same_ids(const Tensor& a, const Tensor& b) {
    for (int64_t i = 0; i < a.numel(); ++i)
        if (a.ptr<int32_t>()[i] != b.ptr<int32_t>()[i]) return false;
    return true;
}

TEST(DflashSelect, GreedyMatchesNaiveWalk) {
    for (int64_t R : {8, 100, 256}) {
        const Select s(3, 7, 16, R, 50, uint64_t(R));
        const Select::Out want = s.naive(0.0f);
        // The data can tell a walk that never updates its predecessor.
        EXPECT_FALSE(same_ids(s.naive(0.0f, true).path, want.path)) << "R=" << R;
        for (const auto& ctx : {kRef, kFast}) {
            const Select::Out got = s.run(ctx, 0.0f);
            EXPECT_TRUE(near(got.path, want.path, kExact)) << "R=" << R;
            EXPECT_TRUE(near(got.q, want.q, kExact)) << "R=" << R;
        }
    }
}

TEST(DflashSelect, GreedyTieTakesTheLowestIndex) {
    Select s(3, 7, 16, 64, 50, 7);
    // Position (1, 2): candidates 3 and 9 are the same id with the same unary score, far above
    // the rest: their scores are equal in every mode, and candidate 3 wins.
    int32_t* cand = s.cand.ptr<int32_t>() + (1 * 7 + 2) * 16;
    float* unary = s.unary.ptr<float>() + (1 * 7 + 2) * 16;
    cand[9] = cand[3];
    unary[3] = unary[9] = 100.0f;
    for (const auto& ctx : {kRef, kFast}) {
        const Select::Out got = s.run(ctx, -1.0f); // any temperature <= 0 is greedy
        const float* q = got.q.ptr<float>() + (1 * 7 + 2) * 16;
        EXPECT_EQ(q[3], 1.0f);
        EXPECT_EQ(q[9], 0.0f);
        EXPECT_EQ(got.path.ptr<int32_t>()[1 * 7 + 2], cand[3]);
        EXPECT_TRUE(near(got.path, s.naive(0.0f).path, kExact));
    }
}

TEST(DflashSelect, SamplingHitsTheAimedCandidates) {
    for (int64_t R : {8, 256}) {
        Select s(3, 7, 16, R, 50, uint64_t(100 + R));
        const float temperature = 0.8f;
        // Aim at spread-out candidates, not only the likeliest ones.
        std::vector<int64_t> chosen =
            s.aim(temperature, [](int64_t b, int64_t i) { return 5 * b + 7 * i; });
        // Position (2, 6), the last: u past the total, which no prefix sum exceeds, takes the
        // last candidate.
        s.u.ptr<float>()[2 * 7 + 6] = 2.0f;
        chosen.back() = 15;
        const Select::Out want = s.naive(temperature);
        for (int64_t b = 0; b < 3; ++b)
            for (int64_t i = 0; i < 7; ++i)
                EXPECT_EQ(want.path.ptr<int32_t>()[b * 7 + i],
                          s.cand_at(b, i, chosen[size_t(b * 7 + i)]))
                    << "b=" << b << " i=" << i;
        int64_t not_argmax = 0; // sampling, not greedy decoding in disguise
        for (int64_t row = 0; row < 3 * 7; ++row) {
            const float* q = want.q.ptr<float>() + row * 16;
            not_argmax += std::max_element(q, q + 16) - q != chosen[size_t(row)];
        }
        EXPECT_GT(not_argmax, 5);
        // q depends on the predecessor: a walk that kept the anchor would see other softmaxes.
        EXPECT_FALSE(near(s.naive(temperature, true).q, want.q, kReductionF32));
        for (const auto& ctx : {kRef, kFast}) {
            const Select::Out got = s.run(ctx, temperature);
            EXPECT_TRUE(near(got.path, want.path, kExact)) << "R=" << R;
            EXPECT_TRUE(near(got.q, want.q, ctx.reference() ? kElementwiseF32 : kReductionF32))
                << "R=" << R;
            for (int64_t row = 0; row < 3 * 7; ++row) {
                double sum = 0;
                for (int64_t c = 0; c < 16; ++c) sum += got.q.ptr<float>()[row * 16 + c];
                EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << row;
            }
        }
    }
}

TEST(DflashSelect, FastMatchesReferenceWideShapes) {
    struct Case {
        int64_t B, K, k, R, V;
        float temperature;
    };
    for (Case tc : {Case{3, 7, 64, 512, 300, 0.0f},
                    {5, 16, 1, 32, 10, 0.0f},
                    {2, 9, 64, 200, 40, 1.3f},
                    {4, 3, 5, 0, 6, 0.0f}}) {
        Select s(tc.B, tc.K, tc.k, tc.R, tc.V, 9);
        std::mt19937 gen(11);
        std::uniform_real_distribution<float> uni(0.0f, 1.0f);
        for (int64_t i = 0; i < s.u.numel(); ++i) s.u.ptr<float>()[i] = uni(gen);
        if (tc.temperature > 0)
            s.aim(tc.temperature, [](int64_t b, int64_t i) { return b + 3 * i; });
        const Select::Out ref = s.run(kRef, tc.temperature), fast = s.run(kFast, tc.temperature);
        EXPECT_TRUE(near(ref.path, s.naive(tc.temperature).path, kExact)) << "k=" << tc.k;
        EXPECT_TRUE(near(fast.path, ref.path, kExact)) << "k=" << tc.k << " R=" << tc.R;
        EXPECT_TRUE(near(fast.q, ref.q, kReductionF32)) << "k=" << tc.k << " R=" << tc.R;
    }
}

TEST(DflashSelect, RejectsBadArguments) {
    Select s(2, 3, 4, 8, 10, 12);
    Tensor path = zeros({2, 3}, DType::I32), q = zeros({2, 3, 4});
    auto call = [&](float t, const TensorView& u) {
        ops::dflash_select(kFast, s.unary, s.cand, s.g, s.P, s.S, s.anchor, u, t, path, q);
    };
    EXPECT_NO_THROW(call(0.0f, TensorView{})); // greedy reads no u
    EXPECT_NO_THROW(call(1.0f, s.u));
    EXPECT_THROW(call(1.0f, TensorView{}), Error);               // sampling needs u
    EXPECT_THROW(call(1.0f, s.u.view().narrow(1, 0, 2)), Error); // u shape
    s.cand.ptr<int32_t>()[5] = 10;                               // id == V
    EXPECT_THROW(call(0.0f, TensorView{}), Error);
    s.cand.ptr<int32_t>()[5] = -1;
    EXPECT_THROW(call(0.0f, TensorView{}), Error);
    s.cand.ptr<int32_t>()[5] = 9;
    s.anchor.ptr<int32_t>()[1] = 10;
    EXPECT_THROW(call(0.0f, TensorView{}), Error);
    s.anchor.ptr<int32_t>()[1] = 0;
    EXPECT_NO_THROW(call(0.0f, TensorView{}));

    auto call_with = [&](const TensorView& unary, const TensorView& cand, const TensorView& P,
                         const TensorView& S, const TensorView& p, const TensorView& qq) {
        ops::dflash_select(kFast, unary, cand, s.g, P, S, s.anchor, TensorView{}, 0.0f, p, qq);
    };
    Tensor big_u = zeros({2, 3, 65}), big_c = zeros({2, 3, 65}, DType::I32),
           big_q = zeros({2, 3, 65});
    EXPECT_THROW(call_with(big_u, big_c, s.P, s.S, path, big_q), Error); // k > 64
    Tensor fc = zeros({2, 3, 4});
    EXPECT_THROW(call_with(s.unary, fc, s.P, s.S, path, q), Error); // cand not I32
    Tensor s9 = random_tensor({9, 8}, 13), s10r7 = random_tensor({10, 7}, 14);
    EXPECT_THROW(call_with(s.unary, s.cand, s.P, s9, path, q), Error);    // V differs
    EXPECT_THROW(call_with(s.unary, s.cand, s.P, s10r7, path, q), Error); // R differs
    Tensor fpath = zeros({2, 3});
    EXPECT_THROW(call_with(s.unary, s.cand, s.P, s.S, fpath, q), Error); // path not I32
    Tensor q5 = zeros({2, 3, 5});
    EXPECT_THROW(call_with(s.unary, s.cand, s.P, s.S, path, q5), Error);
    Tensor pbf = zeros({10, 8}, DType::BF16);
    EXPECT_THROW(call_with(s.unary, s.cand, pbf, s.S, path, q), Error); // P's dtype is not g's
}

} // namespace
} // namespace ninfer::test
