// attention_prep on CUDA (label cuda) against the CPU reference (FP64 composition of rms_norm,
// rope and kv_cache_write), F32 and BF16: decode rows of several sequences at various positions,
// ragged prefill batches (with an empty sequence), the real shapes (35B: nH 16, nKV 2; 27B: nH 24,
// nKV 4; D 256, rotary 64), the rotary extremes (16 and D), and shapes the fused kernel refuses
// (rotary dim, head dim, a row stride that breaks 16-byte alignment), which must still be right
// through the composition. Inputs are head views of an in_proj output whose rows are wider than
// the attention columns, as the model passes them; block tables are neither contiguous nor
// ascending, and cache entries the batch does not own must stay as they were.
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/attention_prep.h"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::test {
namespace {

constexpr float kEps = 1e-6f;
constexpr double kTheta = 1e7; // Qwen3.5's rope_theta
constexpr int32_t kBlock = 16;

struct PrepCase {
    int64_t nH, nKV, D, rot;
    std::vector<SeqSpec> seqs; // blocks filled in by run_case
    bool fused;                // whether the fused kernel takes the case
    int64_t pad = 64;          // proj columns past the attention ones (the scratch is wider)
};

// One attention layer's tensors on one side (host F32 or device): in_proj's output [T, W + pad]
// (per query head [q | gate], then k, then v), the weights, the caches and the outputs.
struct Side {
    int64_t nH, nKV, D;
    Tensor proj, q_norm, k_norm, positions, k_cache, v_cache, q, k;

    TensorView head_view(int64_t col0, int64_t heads, int64_t stride) const {
        const int64_t W = (2 * nH + 2 * nKV) * D;
        return proj.view().narrow(1, 0, W).split_heads(col0, heads, D, stride);
    }
    TensorView q_in() const { return head_view(0, nH, 2 * D); }
    TensorView k_in() const { return head_view(2 * nH * D, nKV, D); }
    TensorView v_in() const { return head_view((2 * nH + nKV) * D, nKV, D); }
    void run(const ops::ExecContext& ctx, const ops::SeqBatch& batch, int64_t rot) const {
        ops::attention_prep(ctx, q_in(), k_in(), v_in(), q_norm, k_norm, kEps, positions, rot,
                            kTheta, batch, q, k, k_cache, v_cache);
    }
};

// Calls fn(row, block, offset) for every row of the batch, in row order.
template <typename Fn> void for_each_slot(const std::vector<SeqSpec>& seqs, Fn&& fn) {
    int64_t r = 0;
    for (const SeqSpec& s : seqs)
        for (int32_t i = 0; i < s.rows; ++i, ++r) {
            const int32_t p = s.pos_begin + i;
            fn(r, int64_t(s.blocks[size_t(p / kBlock)]), int64_t(p % kBlock));
        }
}

// The cache rows [T, nKV, D] the batch's rows were written to.
Tensor written_rows(const Tensor& cache, const std::vector<SeqSpec>& seqs, int64_t T) {
    const int64_t row = cache.size(2) * cache.size(3);
    Tensor out = zeros({T, cache.size(2), cache.size(3)});
    for_each_slot(seqs, [&](int64_t r, int64_t block, int64_t off) {
        std::copy_n(cache.ptr<float>() + (block * kBlock + off) * row, row,
                    out.ptr<float>() + r * row);
    });
    return out;
}

// A copy of cache with the batch's rows taken from `from` (so only other entries can differ).
Tensor with_rows_from(const Tensor& cache, const Tensor& from, const std::vector<SeqSpec>& seqs) {
    const int64_t row = cache.size(2) * cache.size(3);
    Tensor out = clone(cache);
    for_each_slot(seqs, [&](int64_t, int64_t block, int64_t off) {
        const int64_t at = (block * kBlock + off) * row;
        std::copy_n(from.ptr<float>() + at, row, out.ptr<float>() + at);
    });
    return out;
}

bool fused_routes_on() {
    const char* env = std::getenv("NINFER_FUSED"); // the switch fused_routes_enabled() reads
    return !(env && std::string(env) == "0");
}

class CudaAttentionPrep : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    const Tolerance& tol() const { return dt() == DType::F32 ? kCudaF32 : kBf16Elementwise; }

    void run_case(PrepCase tc) const {
        const auto c = cuda_ctx(dt());
        // Blocks: odd ids handed out in descending order, so tables are neither contiguous nor
        // ascending and the even blocks are never the batch's.
        int64_t T = 0, needed = 0;
        std::vector<int32_t> pos;
        for (const SeqSpec& s : tc.seqs) needed += (s.pos_begin + s.rows + kBlock - 1) / kBlock;
        const int64_t NB = 2 * needed + 1;
        int32_t next = int32_t(NB - 2);
        for (SeqSpec& s : tc.seqs) {
            for (int32_t b = 0; b < (s.pos_begin + s.rows + kBlock - 1) / kBlock; ++b, next -= 2)
                s.blocks.push_back(next);
            for (int32_t i = 0; i < s.rows; ++i) pos.push_back(s.pos_begin + i);
            T += s.rows;
        }
        DualBatch batch(c, tc.seqs, kBlock);
        const int64_t W = (2 * tc.nH + 2 * tc.nKV) * tc.D;
        Tensor norm_q = random_tensor({tc.D}, 601, 0.2f), norm_k = random_tensor({tc.D}, 602, 0.2f);
        const Side ref{tc.nH,
                       tc.nKV,
                       tc.D,
                       rounded(random_tensor({T, W + tc.pad}, 600, 2.0f), dt()),
                       rounded(norm_q, dt()),
                       rounded(norm_k, dt()),
                       i32_tensor(pos),
                       rounded(random_tensor({NB, kBlock, tc.nKV, tc.D}, 603), dt()),
                       rounded(random_tensor({NB, kBlock, tc.nKV, tc.D}, 604), dt()),
                       zeros({T, tc.nH, tc.D}),
                       zeros({T, tc.nKV, tc.D})};
        const Tensor k_cache0 = clone(ref.k_cache), v_cache0 = clone(ref.v_cache);
        const Side dev{tc.nH,
                       tc.nKV,
                       tc.D,
                       to_device(c, ref.proj, dt()),
                       to_device(c, ref.q_norm, dt()),
                       to_device(c, ref.k_norm, dt()),
                       to_device(c, ref.positions, dt()),
                       to_device(c, ref.k_cache, dt()),
                       to_device(c, ref.v_cache, dt()),
                       to_device(c, ref.q, dt()),
                       to_device(c, ref.k, dt())};
        std::ostringstream what;
        what << "nH=" << tc.nH << " nKV=" << tc.nKV << " D=" << tc.D << " rot=" << tc.rot
             << " pad=" << tc.pad << " seqs (rows@pos):";
        for (const auto& s : tc.seqs) what << " " << s.rows << "@" << s.pos_begin;
        EXPECT_EQ(ops::cuda::attention_prep_fused_fits(dev.q_in(), dev.k_in(), dev.v_in(),
                                                       dev.q_norm, dev.k_norm, tc.rot, dev.q,
                                                       dev.k_cache, dev.v_cache),
                  tc.fused && fused_routes_on())
            << what.str();
        ref.run(kCpuRef, batch.host(), tc.rot);
        dev.run(c, batch.device(), tc.rot);
        const Tensor k_cache = to_host(c, dev.k_cache), v_cache = to_host(c, dev.v_cache);
        EXPECT_TRUE(near(to_host(c, dev.q), ref.q, tol())) << what.str();
        EXPECT_TRUE(
            near(written_rows(k_cache, tc.seqs, T), written_rows(ref.k_cache, tc.seqs, T), tol()))
            << what.str();
        EXPECT_TRUE(
            near(written_rows(v_cache, tc.seqs, T), written_rows(ref.v_cache, tc.seqs, T), kExact))
            << what.str();
        EXPECT_TRUE(near(with_rows_from(k_cache, k_cache0, tc.seqs), k_cache0, kExact))
            << what.str();
        EXPECT_TRUE(near(with_rows_from(v_cache, v_cache0, tc.seqs), v_cache0, kExact))
            << what.str();
    }
};

TEST_P(CudaAttentionPrep, Qwen35BDecode) {
    run_case({16, 2, 256, 64, {{1, 0, 0}}, true});
    run_case({16, 2, 256, 64, {{1, 17, 0}, {1, 300, 1}, {1, 2500, 2}, {1, 31, 3}}, true});
}

TEST_P(CudaAttentionPrep, Qwen27BDecode) {
    run_case({24, 4, 256, 64, {{1, 1023}, {1, 16}, {1, 2}}, true});
}

TEST_P(CudaAttentionPrep, RaggedPrefill) {
    // Prompt chunks crossing blocks, after a cached context, next to decode rows and an empty
    // sequence.
    run_case({16, 2, 256, 64, {{37, 0}, {1, 200}, {0, 5}, {20, 45}}, true});
    run_case({24, 4, 256, 64, {{70, 300}, {1, 9}}, true});
    run_case({8, 2, 128, 32, {{5, 0}, {33, 16}, {1, 3}}, true}); // half the lanes hold dims
}

TEST_P(CudaAttentionPrep, RotaryExtremes) {
    run_case({4, 2, 64, 16, {{3, 0}, {1, 40}}, true});   // one lane pair rotates
    run_case({4, 2, 256, 256, {{3, 7}, {1, 90}}, true}); // every lane rotates, 4 rounds
    run_case({4, 4, 128, 128, {{9, 20}, {1, 0}}, true}); // full rotary, no GQA
}

TEST_P(CudaAttentionPrep, RefusedShapesRunTheComposition) {
    run_case({4, 2, 96, 24, {{3, 0}, {1, 40}}, false});  // rotate-half partner inside a lane
    run_case({4, 2, 20, 8, {{3, 0}, {1, 40}}, false});   // head dim not a multiple of 8
    run_case({4, 2, 288, 64, {{3, 0}, {1, 40}}, false}); // head dim beyond a warp's 256
    // proj rows 4 elements past a multiple of 8: the heads are not 16-byte aligned.
    run_case({16, 2, 256, 64, {{1, 17}, {5, 3}}, false, 4});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaAttentionPrep, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
