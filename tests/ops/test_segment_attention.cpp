// ops/segment_attention.h: the CPU reference against hand-computed softmaxes, one-row segments,
// isolation between segments, the fast path against the reference (many and unequal segments,
// strided q/k/v views of a fused [T, 3, nH, D] projection, odd D), argument checks.
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/segment_attention.h"

namespace ninfer::test {
namespace {

// q, k, v as views of one fused [T, 3 * nH * D] projection (the vision tower's qkv output).
struct Qkv {
    int64_t T, nH, D;
    Tensor fused;
    Qkv(int64_t T_, int64_t nH_, int64_t D_, uint64_t seed, float scale = 1.0f)
        : T(T_), nH(nH_), D(D_), fused(random_tensor({T_, 3 * nH_ * D_}, seed, scale)) {}
    TensorView part(int i) const { return fused.view().split_heads(i * nH * D, nH, D); }
    TensorView q() const { return part(0); }
    TensorView k() const { return part(1); }
    TensorView v() const { return part(2); }
};

Tensor attend(const ops::ExecContext& ctx, const Qkv& x, const std::vector<int32_t>& seg,
              float scale) {
    Tensor out = zeros({x.T, x.nH, x.D});
    fill_nan(out);
    Tensor segments = i32_tensor(seg);
    ops::segment_attention(ctx, x.q(), x.k(), x.v(), seg.data(), segments, scale, out);
    return out;
}

TEST(SegmentAttention, ReferenceMatchesHandComputedSoftmax) {
    // One segment of two rows, one head, D = 1: q = [1, 0], k = [1, 2], v = [10, 20], scale 0.5.
    Tensor q = f32_tensor({2, 1, 1}, {1, 0}), k = f32_tensor({2, 1, 1}, {1, 2});
    Tensor v = f32_tensor({2, 1, 1}, {10, 20}), out = zeros({2, 1, 1});
    const std::vector<int32_t> seg{0, 2};
    for (const auto& ctx : {kRef, kFast}) {
        ops::segment_attention(ctx, q, k, v, seg.data(), i32_tensor(seg), 0.5f, out);
        const double w0 = std::exp(0.5) / (std::exp(0.5) + std::exp(1.0));
        EXPECT_NEAR(out.ptr<float>()[0], 10 * w0 + 20 * (1 - w0), 1e-5);
        EXPECT_NEAR(out.ptr<float>()[1], 15.0, 1e-5); // equal scores: the mean
    }
}

TEST(SegmentAttention, BidirectionalWithinTheSegment) {
    // Row 0 sees row 2's key (no causal mask): with a dominant score there it takes row 2's v.
    Tensor q = f32_tensor({3, 1, 2}, {10, 0, 0, 0, 0, 0}),
           k = f32_tensor({3, 1, 2}, {0, 0, 0, 0, 1, 0});
    Tensor v = f32_tensor({3, 1, 2}, {1, 2, 3, 4, 5, 6}), out = zeros({3, 1, 2});
    const std::vector<int32_t> seg{0, 3};
    ops::segment_attention(kRef, q, k, v, seg.data(), i32_tensor(seg), 4.0f, out);
    const double w = 1.0 / (2 * std::exp(-40.0) + 1); // weight of key 2 for row 0
    EXPECT_NEAR(out.ptr<float>()[0], 5 * w + (1 + 3) * (1 - w) / 2, 1e-6);
    EXPECT_NEAR(out.ptr<float>()[1], 6 * w + (2 + 4) * (1 - w) / 2, 1e-6);
    EXPECT_NEAR(out.ptr<float>()[2], 3.0, 1e-6); // row 1: all scores 0, the mean of v
}

TEST(SegmentAttention, OneRowSegmentsReturnTheirValue) {
    // A segment of one row attends to itself alone: softmax weight 1, out = v exactly.
    Qkv x(9, 3, 8, 1, 3.0f);
    std::vector<int32_t> seg(10);
    std::iota(seg.begin(), seg.end(), 0);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = attend(ctx, x, seg, 0.35f);
        EXPECT_TRUE(near(out, clone(x.v()), kExact));
    }
}

TEST(SegmentAttention, SegmentsAreIsolated) {
    // The concatenated call equals each segment run alone, and changing another segment's
    // keys and values changes nothing (bit for bit, both modes).
    const int64_t nH = 2, D = 12;
    const std::vector<int32_t> seg{0, 5, 6, 19, 19, 30}; // an empty segment included
    Qkv x(30, nH, D, 2);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor all = attend(ctx, x, seg, 0.3f);
        for (size_t s = 0; s + 1 < seg.size(); ++s) {
            const int64_t r0 = seg[s], n = seg[s + 1] - seg[s];
            if (n == 0) continue;
            const TensorView q = rows(x.q(), r0, n), k = rows(x.k(), r0, n), v = rows(x.v(), r0, n);
            Tensor alone = zeros({n, nH, D});
            const std::vector<int32_t> one{0, int32_t(n)};
            ops::segment_attention(ctx, q, k, v, one.data(), i32_tensor(one), 0.3f, alone);
            EXPECT_TRUE(near(rows(all, r0, n), alone, kExact)) << "segment " << s;
        }
        Qkv y(30, nH, D, 2);
        for (int64_t c = 0; c < y.fused.size(1); ++c)
            y.fused.ptr<float>()[25 * y.fused.size(1) + c] = 7;
        Tensor changed = attend(ctx, y, seg, 0.3f);
        EXPECT_TRUE(near(rows(changed, 0, 19), rows(all, 0, 19), kExact));
    }
}

TEST(SegmentAttention, FastMatchesReferenceManySegments) {
    std::mt19937 gen(5);
    struct Case {
        int64_t nH, D;
        int segments, max_len;
    };
    for (Case tc : {Case{16, 72, 6, 150}, {4, 16, 120, 9}, {3, 5, 7, 40}, {1, 1, 3, 20}}) {
        std::vector<int32_t> seg{0};
        std::uniform_int_distribution<int> len(1, tc.max_len);
        for (int s = 0; s < tc.segments; ++s) seg.push_back(seg.back() + len(gen));
        Qkv x(seg.back(), tc.nH, tc.D, 3, 1.5f);
        const float scale = 1.0f / std::sqrt(float(tc.D));
        Tensor ref = attend(kRef, x, seg, scale), fast = attend(kFast, x, seg, scale);
        EXPECT_TRUE(near(fast, ref, kReductionF32))
            << "T=" << seg.back() << " nH=" << tc.nH << " D=" << tc.D;
    }
}

TEST(SegmentAttention, LargeScoresStayFinite) {
    // Scores of several thousand: the max is subtracted before exp in both modes.
    Qkv x(40, 2, 8, 4, 30.0f);
    const std::vector<int32_t> seg{0, 1, 17, 40};
    Tensor ref = attend(kRef, x, seg, 1.0f), fast = attend(kFast, x, seg, 1.0f);
    EXPECT_TRUE(near(fast, ref, kReductionF32));
}

TEST(SegmentAttention, RejectsBadArguments) {
    Qkv x(6, 2, 4, 6);
    Tensor out = zeros({6, 2, 4});
    auto run = [&](const std::vector<int32_t>& seg, const TensorView& o) {
        ops::segment_attention(kFast, x.q(), x.k(), x.v(), seg.data(), i32_tensor(seg), 1.0f, o);
    };
    EXPECT_NO_THROW(run({0, 2, 6}, out));
    EXPECT_THROW(run({0, 2, 5}, out), Error);    // does not reach T
    EXPECT_THROW(run({1, 2, 6}, out), Error);    // does not start at 0
    EXPECT_THROW(run({0, 4, 3, 6}, out), Error); // decreasing
    Tensor wide = zeros({6, 2, 8});
    EXPECT_THROW(run({0, 6}, wide.view().narrow(2, 0, 4)), Error); // out not contiguous
    Tensor small = zeros({6, 2, 3});
    EXPECT_THROW(run({0, 6}, small), Error);
    const std::vector<int32_t> seg{0, 6};
    Tensor k5 = zeros({5, 2, 4});
    EXPECT_THROW(
        ops::segment_attention(kFast, x.q(), k5, x.v(), seg.data(), i32_tensor(seg), 1.0f, out),
        Error);
    Tensor f = zeros({2});
    EXPECT_THROW(ops::segment_attention(kFast, x.q(), x.k(), x.v(), seg.data(), f, 1.0f, out),
                 Error); // segments must be I32
}

} // namespace
} // namespace ninfer::test
