// ops/attention.h: kv_cache_write and paged_attention against a naive causal attention.
#include "ops/attention_test_util.h"

namespace ninfer::test {
namespace {

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
