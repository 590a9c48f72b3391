// ops/attention.h: kv_cache_write and paged_attention against a naive causal attention.
#include <algorithm>
#include <random>

#include "ops/attention.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

constexpr int32_t kBlock = 16;

struct AttnDims {
    int64_t nH, nKV, D;
};

// A batch whose sequences hold their whole K/V un-paged (for the naive attention), the paged
// cache with the history [0, pos_begin) already written, and this call's k, v, q rows.
struct AttnSetup {
    AttnDims d;
    std::vector<SeqSpec> seqs;
    std::vector<Tensor> k_full, v_full; // per sequence [context, nKV, D]
    Tensor k_cache, v_cache;            // [NB, bs, nKV, D], NaN where nothing was written
    Tensor q, k, v;                     // this call's rows
};

// Gives each sequence the blocks it needs, taken from a shuffled pool of num_blocks ids, so
// tables are neither contiguous nor increasing; sequence 0 gets its blocks in reversed order.
std::vector<SeqSpec> with_blocks(std::vector<SeqSpec> seqs, int32_t num_blocks, uint64_t seed) {
    std::vector<int32_t> pool(static_cast<size_t>(num_blocks), 0);
    for (int32_t i = 0; i < num_blocks; ++i) pool[size_t(i)] = i;
    std::mt19937_64 gen(seed);
    std::shuffle(pool.begin(), pool.end(), gen);
    size_t next = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
        const int32_t needed = (seqs[s].pos_begin + seqs[s].rows + kBlock - 1) / kBlock;
        seqs[s].blocks.clear();
        for (int32_t i = 0; i < needed; ++i) seqs[s].blocks.push_back(pool.at(next++));
        if (s == 0) std::sort(seqs[s].blocks.begin(), seqs[s].blocks.end(), std::greater<>());
    }
    return seqs;
}

AttnSetup make_setup(AttnDims d, const std::vector<SeqSpec>& seqs_in, int32_t num_blocks,
                     uint64_t seed) {
    AttnSetup a{d, with_blocks(seqs_in, num_blocks, seed), {}, {}, {}, {}, {}, {}, {}};
    int64_t T = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s) {
        const int64_t context = a.seqs[s].pos_begin + a.seqs[s].rows;
        a.k_full.push_back(random_tensor({context, d.nKV, d.D}, seed + 10 * s + 1));
        a.v_full.push_back(random_tensor({context, d.nKV, d.D}, seed + 10 * s + 2));
        T += a.seqs[s].rows;
    }
    a.k_cache = zeros({num_blocks, kBlock, d.nKV, d.D});
    a.v_cache = zeros({num_blocks, kBlock, d.nKV, d.D});
    fill_nan(a.k_cache);
    fill_nan(a.v_cache);
    // History: one write per sequence of its positions [0, pos_begin).
    for (size_t s = 0; s < a.seqs.size(); ++s) {
        const int32_t n = a.seqs[s].pos_begin;
        if (n == 0) continue;
        HostBatch history({{n, 0, 0, a.seqs[s].blocks}}, kBlock);
        ops::kv_cache_write(kRef, rows(a.k_full[s], 0, n), rows(a.v_full[s], 0, n), history,
                            a.k_cache, a.v_cache);
    }
    a.q = random_tensor({T, d.nH, d.D}, seed + 5);
    a.k = zeros({T, d.nKV, d.D});
    a.v = zeros({T, d.nKV, d.D});
    const int64_t row = d.nKV * d.D;
    int64_t r = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s)
        for (int64_t i = 0; i < a.seqs[s].rows; ++i, ++r) {
            const int64_t p = a.seqs[s].pos_begin + i;
            std::copy_n(a.k_full[s].ptr<float>() + p * row, row, a.k.ptr<float>() + r * row);
            std::copy_n(a.v_full[s].ptr<float>() + p * row, row, a.v.ptr<float>() + r * row);
        }
    return a;
}

// softmax_{tau <= p}(scale q . K_tau) V_tau in FP64 over the un-paged K/V of each sequence.
Tensor naive_attention(const AttnSetup& a, float scale) {
    const AttnDims d = a.d;
    Tensor out = zeros({a.q.size(0), d.nH, d.D});
    int64_t r = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s)
        for (int64_t i = 0; i < a.seqs[s].rows; ++i, ++r) {
            const int64_t p = a.seqs[s].pos_begin + i;
            for (int64_t h = 0; h < d.nH; ++h) {
                const int64_t kvh = h / (d.nH / d.nKV);
                const float* q = a.q.ptr<float>() + (r * d.nH + h) * d.D;
                std::vector<double> w(static_cast<size_t>(p + 1), 0.0);
                double max_score = -INFINITY, denom = 0;
                for (int64_t tau = 0; tau <= p; ++tau) {
                    const float* k = a.k_full[s].ptr<float>() + (tau * d.nKV + kvh) * d.D;
                    double dot = 0;
                    for (int64_t j = 0; j < d.D; ++j) dot += double(q[j]) * k[j];
                    w[size_t(tau)] = dot * scale;
                    max_score = std::max(max_score, w[size_t(tau)]);
                }
                for (double& x : w) denom += x = std::exp(x - max_score);
                float* o = out.ptr<float>() + (r * d.nH + h) * d.D;
                for (int64_t j = 0; j < d.D; ++j) {
                    double acc = 0;
                    for (int64_t tau = 0; tau <= p; ++tau)
                        acc += w[size_t(tau)] / denom *
                               a.v_full[s].ptr<float>()[(tau * d.nKV + kvh) * d.D + j];
                    o[j] = float(acc);
                }
            }
        }
    return out;
}

// Decode rows (pos_begin > 0, one row) mixed with prompt chunks, contexts across many blocks.
const std::vector<SeqSpec> kMixed{
    {1, 40, 0}, {37, 0, 0}, {17, 20, 0}, {1, 149, 0}, {65, 0, 0},
};
constexpr int32_t kMixedBlocks = 30; // 24 used, 6 left NaN

TEST(KvCacheWrite, PlacesPositionsThroughTheBlockTable) {
    AttnSetup a = make_setup({4, 2, 8}, kMixed, kMixedBlocks, 200);
    HostBatch batch(a.seqs, kBlock);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor kc = clone(a.k_cache), vc = clone(a.v_cache);
        ops::kv_cache_write(ctx, a.k, a.v, batch, kc, vc);
        std::vector<bool> used(kMixedBlocks, false);
        const int64_t row = a.d.nKV * a.d.D;
        for (size_t s = 0; s < a.seqs.size(); ++s) {
            for (int32_t b : a.seqs[s].blocks) used[size_t(b)] = true;
            for (int64_t p = 0; p < a.seqs[s].pos_begin + a.seqs[s].rows; ++p) {
                const int32_t block = a.seqs[s].blocks[size_t(p / kBlock)];
                const int64_t at = (int64_t(block) * kBlock + p % kBlock) * row;
                for (int64_t i = 0; i < row; ++i) {
                    ASSERT_EQ(kc.ptr<float>()[at + i], a.k_full[s].ptr<float>()[p * row + i])
                        << "s=" << s << " p=" << p;
                    ASSERT_EQ(vc.ptr<float>()[at + i], a.v_full[s].ptr<float>()[p * row + i])
                        << "s=" << s << " p=" << p;
                }
            }
        }
        for (int32_t b = 0; b < kMixedBlocks; ++b) { // blocks outside every table: untouched
            if (used[size_t(b)]) continue;
            for (int64_t i = 0; i < kBlock * row; ++i)
                ASSERT_TRUE(std::isnan(kc.ptr<float>()[b * kBlock * row + i])) << b;
        }
    }
}

TEST(PagedAttention, ReferenceMatchesNaiveCausalAttention) {
    for (AttnDims d : {AttnDims{4, 4, 8}, AttnDims{4, 2, 16}, AttnDims{8, 1, 8}}) {
        AttnSetup a = make_setup(d, kMixed, kMixedBlocks, 210 + uint64_t(d.nH * d.nKV));
        HostBatch batch(a.seqs, kBlock);
        ops::kv_cache_write(kRef, a.k, a.v, batch, a.k_cache, a.v_cache);
        const float scale = 1.0f / std::sqrt(float(d.D));
        Tensor out = zeros({a.q.size(0), d.nH, d.D});
        ops::paged_attention(kRef, a.q, a.k_cache, a.v_cache, batch, scale, out);
        // Both in FP64, rounded once to f32.
        EXPECT_TRUE(near(out, naive_attention(a, scale), kElementwiseF32))
            << "nH=" << d.nH << " nKV=" << d.nKV << " D=" << d.D;
    }
}

TEST(PagedAttention, FastMatchesReferenceAcrossGqaGroups) {
    for (AttnDims d :
         {AttnDims{4, 4, 32}, AttnDims{8, 4, 64}, AttnDims{16, 2, 256}, AttnDims{8, 1, 64}}) {
        AttnSetup a = make_setup(d, kMixed, kMixedBlocks, 220 + uint64_t(d.D + d.nH));
        HostBatch batch(a.seqs, kBlock);
        ops::kv_cache_write(kFast, a.k, a.v, batch, a.k_cache, a.v_cache);
        const float scale = 1.0f / std::sqrt(float(d.D));
        Tensor ref = zeros({a.q.size(0), d.nH, d.D}), fast = zeros({a.q.size(0), d.nH, d.D});
        ops::paged_attention(kRef, a.q, a.k_cache, a.v_cache, batch, scale, ref);
        ops::paged_attention(kFast, a.q, a.k_cache, a.v_cache, batch, scale, fast);
        EXPECT_TRUE(near(fast, ref, kReductionF32))
            << "nH=" << d.nH << " nKV=" << d.nKV << " D=" << d.D;
    }
}

TEST(PagedAttention, SingleRowShapesAndLargeScores) {
    // T = 1 at position 0 (attends to itself only: out = v), and a sharp softmax (scale 4).
    for (const auto& ctx : {kRef, kFast}) {
        AttnSetup a = make_setup({8, 2, 64}, {{1, 0, 0}}, 2, 230);
        HostBatch batch(a.seqs, kBlock);
        ops::kv_cache_write(ctx, a.k, a.v, batch, a.k_cache, a.v_cache);
        Tensor out = zeros({1, 8, 64});
        ops::paged_attention(ctx, a.q, a.k_cache, a.v_cache, batch, 0.125f, out);
        for (int64_t h = 0; h < 8; ++h)
            for (int64_t j = 0; j < 64; ++j)
                EXPECT_FLOAT_EQ(out.ptr<float>()[h * 64 + j], a.v.ptr<float>()[(h / 4) * 64 + j]);
        AttnSetup b = make_setup({4, 4, 32}, {{1, 63, 0}}, 5, 231);
        HostBatch batch_b(b.seqs, kBlock);
        ops::kv_cache_write(ctx, b.k, b.v, batch_b, b.k_cache, b.v_cache);
        Tensor out_b = zeros({1, 4, 32});
        ops::paged_attention(ctx, b.q, b.k_cache, b.v_cache, batch_b, 4.0f, out_b);
        EXPECT_TRUE(near(out_b, naive_attention(b, 4.0f),
                         ctx.reference() ? kElementwiseF32 : kReductionF32));
    }
}

TEST(PagedAttention, RejectsBadArguments) {
    AttnSetup a = make_setup({4, 2, 16}, {{3, 0, 0}, {1, 20, 0}}, 4, 240);
    HostBatch batch(a.seqs, kBlock);
    Tensor out = zeros({4, 4, 16});
    EXPECT_NO_THROW(ops::kv_cache_write(kFast, a.k, a.v, batch, a.k_cache, a.v_cache));
    EXPECT_NO_THROW(ops::paged_attention(kFast, a.q, a.k_cache, a.v_cache, batch, 0.25f, out));
    Tensor q6 = random_tensor({4, 6, 16}, 241), out6 = zeros({4, 6, 16}); // 6 % 4 kv heads
    Tensor kc4 = zeros({4, kBlock, 4, 16}), vc4 = zeros({4, kBlock, 4, 16});
    EXPECT_THROW(ops::paged_attention(kFast, q6, kc4, vc4, batch, 0.25f, out6), Error);
    Tensor q_d = random_tensor({4, 4, 8}, 242), out_d = zeros({4, 4, 8});
    EXPECT_THROW(ops::paged_attention(kFast, q_d, a.k_cache, a.v_cache, batch, 0.25f, out_d),
                 Error);
    Tensor out_bad = zeros({4, 4, 15});
    EXPECT_THROW(ops::paged_attention(kFast, a.q, a.k_cache, a.v_cache, batch, 0.25f, out_bad),
                 Error);
    HostBatch wrong_bs(a.seqs, 8); // the cache holds 16 tokens per block
    EXPECT_THROW(ops::paged_attention(kFast, a.q, a.k_cache, a.v_cache, wrong_bs, 0.25f, out),
                 Error);
    EXPECT_THROW(ops::kv_cache_write(kFast, a.k, a.v, wrong_bs, a.k_cache, a.v_cache), Error);
    std::vector<SeqSpec> short_table = a.seqs;
    short_table[1].blocks.pop_back(); // position 20 needs 2 blocks
    HostBatch too_short({short_table[1]}, kBlock);
    EXPECT_THROW(ops::kv_cache_write(kFast, rows(a.k, 3, 1), rows(a.v, 3, 1), too_short, a.k_cache,
                                     a.v_cache),
                 Error);
    std::vector<SeqSpec> bad_id = a.seqs;
    bad_id[0].blocks[0] = 4; // only blocks [0, 4) exist
    HostBatch out_of_range(bad_id, kBlock);
    EXPECT_THROW(ops::kv_cache_write(kFast, a.k, a.v, out_of_range, a.k_cache, a.v_cache), Error);
    EXPECT_THROW(ops::paged_attention(kFast, a.q, a.k_cache, a.v_cache, out_of_range, 0.25f, out),
                 Error);
    Tensor vc_bad = zeros({4, kBlock, 2, 8});
    EXPECT_THROW(ops::kv_cache_write(kFast, a.k, a.v, batch, a.k_cache, vc_bad), Error);
    Tensor k_bad = random_tensor({4, 3, 16}, 243);
    EXPECT_THROW(ops::kv_cache_write(kFast, k_bad, a.v, batch, a.k_cache, a.v_cache), Error);
    Tensor k_short = random_tensor({3, 2, 16}, 244);
    EXPECT_THROW(ops::kv_cache_write(kFast, k_short, a.v, batch, a.k_cache, a.v_cache), Error);
}

} // namespace
} // namespace ninfer::test
