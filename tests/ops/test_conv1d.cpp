// ops/conv1d.h: causal depthwise conv + SiLU over a ragged batch with per-slot conv state.
#include <random>

#include "ops/conv1d.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

// The contract written out: per sequence and channel, the window is the K-1 history values from
// the slot (oldest first) followed by the rows of this call; the new state is the last K-1.
void naive_conv(const Tensor& x, const Tensor& w, const ops::SeqBatch& b, const Tensor& state,
                const Tensor& y) {
    const int64_t C = x.size(1), K = w.size(1);
    for (int32_t s = 0; s < b.num_seqs; ++s) {
        const int64_t r0 = b.host_row_begin[s], n = b.rows(s);
        float* st = state.ptr<float>() + b.host_state_slot[s] * C * (K - 1);
        for (int64_t c = 0; c < C; ++c) {
            std::vector<double> in;
            for (int64_t j = 0; j < K - 1; ++j) in.push_back(st[c * (K - 1) + j]);
            for (int64_t i = 0; i < n; ++i) in.push_back(x.ptr<float>()[(r0 + i) * C + c]);
            for (int64_t i = 0; i < n; ++i) {
                double sum = 0;
                for (int64_t j = 0; j < K; ++j)
                    sum += double(w.ptr<float>()[c * K + j]) * in[i + j];
                y.ptr<float>()[(r0 + i) * C + c] = float(sum / (1.0 + std::exp(-sum)));
            }
            for (int64_t j = 0; j < K - 1; ++j) st[c * (K - 1) + j] = float(in[n + j]);
        }
    }
}

// Slots of sequences that continue (pos_begin > 0) hold random history; fresh ones hold zeros,
// as the runtime leaves them. Unused slots hold random values the op must not touch.
Tensor initial_state(const std::vector<SeqSpec>& seqs, int64_t slots, int64_t C, int64_t K,
                     uint64_t seed) {
    Tensor st = random_tensor({slots, C, K - 1}, seed, 1.5f);
    for (const SeqSpec& s : seqs)
        if (s.pos_begin == 0)
            for (int64_t i = 0; i < C * (K - 1); ++i) st.ptr<float>()[s.slot * C * (K - 1) + i] = 0;
    return st;
}

const std::vector<SeqSpec> kRagged{
    {1, 5, 2}, {17, 0, 0}, {150, 3, 3}, {0, 9, 1}, {64, 64, 4}, {2, 1, 6},
};
constexpr int64_t kRaggedSlots = 7; // slot 5 unused

TEST(CausalConv1d, FastMatchesReferenceOnRaggedBatch) {
    HostBatch batch(kRagged);
    const int64_t T = batch.num_rows();
    for (int64_t K : {2, 3, 4}) {
        for (int64_t C : {8, 100, 1024}) {
            Tensor x = random_tensor({T, C}, 51, 2.0f), w = random_tensor({C, K}, 52, 0.5f);
            Tensor st_ref = initial_state(kRagged, kRaggedSlots, C, K, 53);
            Tensor st_fast = clone(st_ref), st0 = clone(st_ref);
            Tensor ref = zeros({T, C}), fast = zeros({T, C});
            ops::causal_conv1d_silu(kRef, x, w, batch, st_ref, ref);
            ops::causal_conv1d_silu(kFast, x, w, batch, st_fast, fast);
            EXPECT_TRUE(near(fast, ref, kReductionF32)) << "K=" << K << " C=" << C;
            EXPECT_TRUE(near(st_fast, st_ref, kExact)) << "K=" << K << " C=" << C;
            // The unused slot and the zero-row sequence's slot are untouched.
            for (int64_t slot : {1, 5})
                EXPECT_TRUE(near(rows(st_ref, slot, 1), rows(st0, slot, 1), kExact)) << slot;
        }
    }
}

TEST(CausalConv1d, ReferenceMatchesExplicitHistory) {
    for (int64_t K : {2, 3, 4}) {
        const int64_t C = 5;
        HostBatch batch(kRagged);
        const int64_t T = batch.num_rows();
        Tensor x = random_tensor({T, C}, 54, 2.0f), w = random_tensor({C, K}, 55, 0.7f);
        Tensor st = initial_state(kRagged, kRaggedSlots, C, K, 56), st_expect = clone(st);
        Tensor y = zeros({T, C}), y_expect = zeros({T, C});
        ops::causal_conv1d_silu(kRef, x, w, batch, st, y);
        naive_conv(x, w, batch, st_expect, y_expect);
        // Both sides sum in FP64 and round once to f32: the elementwise preset.
        EXPECT_TRUE(near(y, y_expect, kElementwiseF32)) << "K=" << K;
        EXPECT_TRUE(near(st, st_expect, kExact)) << "K=" << K;
    }
}

TEST(CausalConv1d, HandComputedTapsAndStateShift) {
    // One channel, K = 3, history [h0, h1] = [1, 2], weights [w0, w1, w2] = [0.5, -1, 2]:
    // tap K-1 multiplies the current token, tap 0 the oldest input.
    Tensor w = f32_tensor({1, 3}, {0.5f, -1.0f, 2.0f});
    Tensor st = f32_tensor({1, 1, 2}, {1.0f, 2.0f});
    Tensor x = f32_tensor({2, 1}, {3.0f, -4.0f});
    HostBatch batch({{2, 7, 0}});
    Tensor y = zeros({2, 1});
    ops::causal_conv1d_silu(kRef, x, w, batch, st, y);
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    EXPECT_NEAR(y.ptr<float>()[0], silu(0.5 * 1 - 1 * 2 + 2 * 3), 1e-6);
    EXPECT_NEAR(y.ptr<float>()[1], silu(0.5 * 2 - 1 * 3 + 2 * -4), 1e-6);
    EXPECT_EQ(floats(st), (std::vector<float>{3.0f, -4.0f}));
    // A single decode row keeps one old value: state [3, -4] -> [-4, 5].
    Tensor x1 = f32_tensor({1, 1}, {5.0f});
    HostBatch one({{1, 9, 0}});
    Tensor y1 = zeros({1, 1});
    ops::causal_conv1d_silu(kFast, x1, w, one, st, y1);
    EXPECT_NEAR(y1.ptr<float>()[0], silu(0.5 * 3 - 1 * -4 + 2 * 5), 1e-5);
    EXPECT_EQ(floats(st), (std::vector<float>{-4.0f, 5.0f}));
}

TEST(CausalConv1d, TwoCallsEqualOneCall) {
    for (int64_t K : {2, 3, 4}) {
        for (int64_t T : {37, 150}) {
            const int64_t C = 72;
            Tensor x = random_tensor({T, C}, 57, 2.0f), w = random_tensor({C, K}, 58, 0.5f);
            for (const auto& ctx : {kRef, kFast}) {
                Tensor st_one = zeros({2, C, K - 1}), y_one = zeros({T, C});
                HostBatch whole({{int32_t(T), 0, 1}});
                ops::causal_conv1d_silu(ctx, x, w, whole, st_one, y_one);
                for (int64_t split : {int64_t(1), int64_t(2), int64_t(20), T - 1}) {
                    Tensor st = zeros({2, C, K - 1}), y = zeros({T, C});
                    HostBatch first({{int32_t(split), 0, 1}});
                    HostBatch second({{int32_t(T - split), int32_t(split), 1}});
                    ops::causal_conv1d_silu(ctx, rows(x, 0, split), w, first, st,
                                            rows(y, 0, split));
                    ops::causal_conv1d_silu(ctx, rows(x, split, T - split), w, second, st,
                                            rows(y, split, T - split));
                    EXPECT_TRUE(near(y, y_one, kExact))
                        << "K=" << K << " T=" << T << " split=" << split;
                    EXPECT_TRUE(near(st, st_one, kExact))
                        << "K=" << K << " T=" << T << " split=" << split;
                }
            }
        }
    }
}

TEST(CausalConv1d, RejectsBadArguments) {
    const int64_t T = 4, C = 6;
    Tensor x = random_tensor({T, C}, 59), y = zeros({T, C});
    Tensor w = random_tensor({C, 4}, 60), st = zeros({2, C, 3});
    HostBatch batch({{3, 0, 0}, {1, 2, 1}});
    EXPECT_NO_THROW(ops::causal_conv1d_silu(kFast, x, w, batch, st, y));
    Tensor w1 = random_tensor({C, 1}, 61), st0 = zeros({2, C, 0});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w1, batch, st0, y), Error);
    Tensor w10 = random_tensor({C, 10}, 62), st9 = zeros({2, C, 9});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w10, batch, st9, y), Error);
    Tensor st_k = zeros({2, C, 2});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w, batch, st_k, y), Error);
    Tensor w_c = random_tensor({C + 1, 4}, 63);
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w_c, batch, st, y), Error);
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w, batch, st, x), Error); // y aliases x
    HostBatch bad_slot({{3, 0, 0}, {1, 2, 2}});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w, bad_slot, st, y), Error);
    HostBatch short_batch({{3, 0, 0}});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w, short_batch, st, y), Error);
    HostBatch neg_pos({{3, -1, 0}, {1, 2, 1}});
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x, w, neg_pos, st, y), Error);
    Tensor x_int = zeros({T, C}, DType::I32);
    EXPECT_THROW(ops::causal_conv1d_silu(kFast, x_int, w, batch, st, y), Error);
}

} // namespace
} // namespace ninfer::test
