// The tensor-core prefill route of paged_attention against the CPU reference (label cuda):
// bf16 prompt chunks around the route boundary (kFlashMinRows - 1 / kFlashMinRows / + 1), the
// 64-row tile boundary, the 32-key tile boundary, chunks after a cached context, ragged batches
// mixing decode rows and several prompts, GQA groups and head dims 64 / 128 / 256.
#include <sstream>

#include "cuda/cuda_test_util.h"
#include "ops/attention.h"
#include "ops/cuda/attention_flash.h"

namespace ninfer::test {
namespace {

struct AttentionCase {
    int64_t nH, nKV, D;
    std::vector<SeqSpec> seqs; // blocks filled in by run_case
};

// Runs kv_cache_write + paged_attention on both backends (bf16 inputs) and compares.
void run_case(AttentionCase tc) {
    const auto c = cuda_ctx(DType::BF16);
    const int32_t bs = 16;
    int32_t next_block = 0;
    int64_t T = 0;
    for (auto& s : tc.seqs) {
        const int32_t blocks = (s.pos_begin + s.rows + bs - 1) / bs;
        for (int32_t b = 0; b < blocks; ++b) s.blocks.push_back(next_block++);
        T += s.rows;
    }
    // Reverse the block ids: a sequence's blocks are not contiguous or ascending in the pool.
    for (auto& s : tc.seqs)
        for (auto& b : s.blocks) b = next_block - 1 - b;
    DualBatch batch(c, tc.seqs, bs);
    const int64_t NB = next_block;
    auto in = [&](std::initializer_list<int64_t> dims, uint64_t seed) {
        return rounded(random_tensor(dims, seed, 1.0f), DType::BF16);
    };
    Tensor kc = in({NB, bs, tc.nKV, tc.D}, 90), vc = in({NB, bs, tc.nKV, tc.D}, 91);
    Tensor q = in({T, tc.nH, tc.D}, 92), k = in({T, tc.nKV, tc.D}, 93),
           v = in({T, tc.nKV, tc.D}, 94);
    const float scale = 1.0f / std::sqrt(float(tc.D));
    Tensor rk = clone(kc), rv = clone(vc), ref = zeros({T, tc.nH, tc.D});
    ops::kv_cache_write(kCpuRef, k, v, batch.host(), rk, rv);
    ops::paged_attention(kCpuRef, q, rk, rv, batch.host(), scale, ref);
    Tensor dkc = to_device(c, kc, DType::BF16), dvc = to_device(c, vc, DType::BF16);
    ops::kv_cache_write(c, to_device(c, k, DType::BF16), to_device(c, v, DType::BF16),
                        batch.device(), dkc, dvc);
    Tensor dq = to_device(c, q, DType::BF16),
           out = to_device(c, zeros({T, tc.nH, tc.D}), DType::BF16);
    ops::paged_attention(c, dq, dkc, dvc, batch.device(), scale, out);
    std::ostringstream shape;
    shape << "nH=" << tc.nH << " nKV=" << tc.nKV << " D=" << tc.D << " seqs (rows@pos):";
    for (const auto& s : tc.seqs) shape << " " << s.rows << "@" << s.pos_begin;
    EXPECT_TRUE(near(to_host(c, out), ref, kBf16Reduction)) << shape.str();
}

TEST(CudaFlashAttention, RouteBoundaryRows) {
    for (int32_t rows :
         {ops::cuda::kFlashMinRows - 1, ops::cuda::kFlashMinRows, ops::cuda::kFlashMinRows + 1})
        run_case({16, 2, 256, {{rows, 0, 0}}});
}

TEST(CudaFlashAttention, QueryAndKeyTileBoundaries) {
    for (int32_t rows : {31, 32, 33, 63, 64, 65, 129}) run_case({4, 2, 128, {{rows, 0, 0}}});
}

TEST(CudaFlashAttention, ChunkAfterCachedContext) {
    // Tiles start mid key-tile and mid KV block; the real model's shapes (35B: 16/2/256, 27B:
    // 24/4/256).
    run_case({16, 2, 256, {{100, 37, 0}}});
    run_case({24, 4, 256, {{70, 300, 0}}});
}

TEST(CudaFlashAttention, RaggedBatchWithDecodeRows) {
    run_case({8, 8, 64, {{1, 200, 0}, {90, 0, 1}, {17, 5, 2}, {1, 0, 3}, {64, 64, 4}}});
}

TEST(CudaFlashAttention, LongPrompt) {
    run_case({16, 2, 256, {{300, 0, 0}}});
}

} // namespace
} // namespace ninfer::test
