// ops/attention_prep.h: attention_prep on the CPU is exactly the composition it is defined by
// (rms_norm of q and k, rope of both, kv_cache_write), in both modes, on decode and prefill
// batches with paged caches whose other entries stay untouched; and it rejects inconsistent
// arguments.
#include "ops/attention.h"
#include "ops/attention_prep.h"
#include "ops/op_test_util.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"

namespace ninfer::test {
namespace {

constexpr float kEps = 1e-6f;
constexpr double kTheta = 1e7; // Qwen3.5's rope_theta
constexpr int32_t kBlock = 4;  // small blocks: prefill rows cross block boundaries

// One attention layer's in_proj output [T, (2 nH + 2 nKV) D] (per query head [q | gate], then
// k, then v, as the model lays it out), the norm weights and random paged caches.
struct PrepLayer {
    int64_t nH, nKV, D, rot, T, NB;
    int64_t W = (2 * nH + 2 * nKV) * D;
    Tensor proj = random_tensor({T, W}, 500, 2.0f);
    Tensor q_norm = random_tensor({D}, 501, 0.2f), k_norm = random_tensor({D}, 502, 0.2f);
    Tensor k_cache = random_tensor({NB, kBlock, nKV, D}, 503);
    Tensor v_cache = random_tensor({NB, kBlock, nKV, D}, 504);

    TensorView q_in() const { return proj.view().split_heads(0, nH, D, 2 * D); }
    TensorView k_in() const { return proj.view().split_heads(2 * nH * D, nKV, D); }
    TensorView v_in() const { return proj.view().split_heads((2 * nH + nKV) * D, nKV, D); }
};

// Each row's position: pos_begin of its sequence plus its index in the sequence.
Tensor positions_of(const std::vector<SeqSpec>& seqs) {
    std::vector<int32_t> pos;
    for (const SeqSpec& s : seqs)
        for (int32_t i = 0; i < s.rows; ++i) pos.push_back(s.pos_begin + i);
    return i32_tensor(pos);
}

struct Outputs {
    Tensor q, k_cache, v_cache;
};

Outputs run_op(const ops::ExecContext& ctx, const PrepLayer& l, const ops::SeqBatch& batch,
               const Tensor& pos) {
    Outputs o{zeros({l.T, l.nH, l.D}), clone(l.k_cache), clone(l.v_cache)};
    Tensor k = zeros({l.T, l.nKV, l.D});
    ops::attention_prep(ctx, l.q_in(), l.k_in(), l.v_in(), l.q_norm, l.k_norm, kEps, pos, l.rot,
                        kTheta, batch, o.q, k, o.k_cache, o.v_cache);
    return o;
}

// The five ops the model ran before attention_prep, one by one.
Outputs run_composition(const ops::ExecContext& ctx, const PrepLayer& l, const ops::SeqBatch& batch,
                        const Tensor& pos) {
    Outputs o{zeros({l.T, l.nH, l.D}), clone(l.k_cache), clone(l.v_cache)};
    Tensor k = zeros({l.T, l.nKV, l.D});
    ops::rms_norm(ctx, l.q_in(), l.q_norm, kEps, o.q);
    ops::rms_norm(ctx, l.k_in(), l.k_norm, kEps, k);
    ops::rope(ctx, o.q, pos, l.rot, kTheta);
    ops::rope(ctx, k, pos, l.rot, kTheta);
    ops::kv_cache_write(ctx, k, l.v_in(), batch, o.k_cache, o.v_cache);
    return o;
}

void expect_composition(const PrepLayer& l, const std::vector<SeqSpec>& seqs) {
    HostBatch batch(seqs, kBlock);
    const Tensor pos = positions_of(seqs);
    for (const auto& ctx : {kRef, kFast}) {
        const Outputs op = run_op(ctx, l, batch, pos), ref = run_composition(ctx, l, batch, pos);
        const char* mode = ctx.reference() ? "reference" : "fast";
        EXPECT_TRUE(near(op.q, ref.q, kExact)) << mode;
        EXPECT_TRUE(near(op.k_cache, ref.k_cache, kExact)) << mode;
        EXPECT_TRUE(near(op.v_cache, ref.v_cache, kExact)) << mode;
        // Not vacuous: queries were written and both caches changed.
        EXPECT_FALSE(near(op.q, zeros({l.T, l.nH, l.D}), kExact)) << mode;
        EXPECT_FALSE(near(op.k_cache, l.k_cache, kExact)) << mode;
        EXPECT_FALSE(near(op.v_cache, l.v_cache, kExact)) << mode;
    }
}

TEST(AttentionPrep, DecodeRowsEqualComposition) {
    // Three one-row sequences on blocks that are neither contiguous nor ascending; partial rotary.
    const PrepLayer l{4, 2, 16, 8, 3, 12};
    expect_composition(l, {{1, 9, 0, {7, 2, 10}}, {1, 0, 0, {5}}, {1, 4, 0, {11, 3}}});
}

TEST(AttentionPrep, PrefillAndMixedRowsEqualComposition) {
    // Prompt chunks that cross blocks next to a decode row; full rotary, a head dim that is no
    // multiple of 8.
    const PrepLayer l{6, 3, 12, 12, 10, 12};
    expect_composition(l, {{6, 2, 0, {9, 0}}, {1, 7, 0, {4, 6}}, {3, 0, 0, {1}}});
}

TEST(AttentionPrep, RejectsInconsistentArguments) {
    const PrepLayer l{4, 2, 16, 8, 2, 4};
    HostBatch batch({{1, 0, 0, {0}}, {1, 5, 0, {2, 3}}}, kBlock);
    const Tensor pos = i32_tensor({0, 5});
    Tensor q = zeros({l.T, l.nH, l.D}), k = zeros({l.T, l.nKV, l.D});
    Tensor kc = clone(l.k_cache), vc = clone(l.v_cache);
    auto call = [&](const TensorView& q_in, const TensorView& v_in, const TensorView& positions,
                    int64_t rot, const TensorView& k_cache, const ops::SeqBatch& b) {
        ops::attention_prep(kFast, q_in, l.k_in(), v_in, l.q_norm, l.k_norm, kEps, positions, rot,
                            kTheta, b, q, k, k_cache, vc);
    };
    EXPECT_NO_THROW(call(l.q_in(), l.v_in(), pos, 8, kc, batch));
    // Query heads of another head dim than k and v.
    EXPECT_THROW(call(l.proj.view().split_heads(0, l.nH, 8, 2 * l.D), l.v_in(), pos, 8, kc, batch),
                 Error);
    // v with one kv head fewer than k.
    EXPECT_THROW(call(l.q_in(), l.proj.view().split_heads(0, 1, l.D), pos, 8, kc, batch), Error);
    // Rotary dim odd, or beyond the head dim.
    EXPECT_THROW(call(l.q_in(), l.v_in(), pos, 7, kc, batch), Error);
    EXPECT_THROW(call(l.q_in(), l.v_in(), pos, 2 * l.D, kc, batch), Error);
    // Positions of the wrong length or dtype.
    EXPECT_THROW(call(l.q_in(), l.v_in(), i32_tensor({0}), 8, kc, batch), Error);
    EXPECT_THROW(call(l.q_in(), l.v_in(), zeros({l.T}), 8, kc, batch), Error);
    // A cache whose blocks hold another number of tokens than the batch's block size.
    Tensor kc_bs = zeros({l.NB, 2 * kBlock, l.nKV, l.D});
    EXPECT_THROW(call(l.q_in(), l.v_in(), pos, 8, kc_bs, batch), Error);
    // A block id outside the cache.
    HostBatch out_of_range({{1, 0, 0, {0}}, {1, 5, 0, {2, 9}}}, kBlock);
    EXPECT_THROW(call(l.q_in(), l.v_in(), pos, 8, kc, out_of_range), Error);
    // A batch of three rows for two-row tensors.
    HostBatch three_rows({{2, 0, 0, {0}}, {1, 5, 0, {2, 3}}}, kBlock);
    EXPECT_THROW(call(l.q_in(), l.v_in(), pos, 8, kc, three_rows), Error);
    // q of the wrong head count.
    Tensor q_bad = zeros({l.T, l.nKV, l.D});
    EXPECT_THROW(ops::attention_prep(kFast, l.q_in(), l.k_in(), l.v_in(), l.q_norm, l.k_norm, kEps,
                                     pos, 8, kTheta, batch, q_bad, k, kc, vc),
                 Error);
}

} // namespace
} // namespace ninfer::test
