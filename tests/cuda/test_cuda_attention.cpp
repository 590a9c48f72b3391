// The prefill routes of paged_attention against the CPU reference (label cuda), each forced by
// the route table's attention_prefill.bf16: the tensor-core flash kernel and cuDNN's fused
// attention (ops/cuda/attention_cudnn.h). bf16 prompt chunks around the route boundary
// (kFlashMinRows - 1 / kFlashMinRows / + 1), the 64-row tile boundary, the 32-key tile boundary,
// chunks after a cached context, ragged batches mixing decode rows and several prompts, GQA
// groups and head dims 64 / 128 / 256. The cuDNN cases fail, never skip, where cuDNN cannot run
// them, and a sabotaged cuDNN run (one key short) must fail the same comparison.
#include <sstream>
#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/attention.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_flash.h"
#include "ops/route_table.h"

namespace ninfer::test {
namespace {

struct AttentionCase {
    int64_t nH, nKV, D;
    std::vector<SeqSpec> seqs; // blocks filled in by run_case
};

// Runs kv_cache_write + paged_attention on both backends (bf16 inputs); whether the device's
// output is within the bf16 preset of the reference. *what names the case.
bool run_case(AttentionCase tc, std::string* what) {
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
    *what = shape.str();
    return near(to_host(c, out), ref, kBf16Reduction);
}

class CudaPrefillAttention : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (GetParam() == ops::kRouteCudnn) {
            ASSERT_TRUE(ops::cuda::cudnn_available())
                << "cuDNN route: " << ops::cuda::cudnn_status();
        }
        runs_before_ = ops::cuda::cudnn_prefill_runs();
    }
    // The cuDNN cases must have run on cuDNN (a shape without a plan falls back to flash).
    void TearDown() override {
        if (GetParam() == ops::kRouteCudnn) {
            EXPECT_GT(ops::cuda::cudnn_prefill_runs(), runs_before_)
                << "cuDNN served none of the prefill calls (see its message on stderr)";
        }
    }
    void run(AttentionCase tc) {
        ForcedRoute kernel(ops::RouteId::AttentionPrefillBf16, GetParam());
        std::string what;
        EXPECT_TRUE(run_case(std::move(tc), &what)) << what;
    }

private:
    uint64_t runs_before_ = 0;
};

TEST_P(CudaPrefillAttention, RouteBoundaryRows) {
    for (int32_t rows :
         {ops::cuda::kFlashMinRows - 1, ops::cuda::kFlashMinRows, ops::cuda::kFlashMinRows + 1})
        run({16, 2, 256, {{rows, 0, 0}}});
}

TEST_P(CudaPrefillAttention, QueryAndKeyTileBoundaries) {
    for (int32_t rows : {31, 32, 33, 63, 64, 65, 129}) run({4, 2, 128, {{rows, 0, 0}}});
}

TEST_P(CudaPrefillAttention, ChunkAfterCachedContext) {
    // Tiles start mid key-tile and mid KV block; the real model's shapes (35B: 16/2/256, 27B:
    // 24/4/256).
    run({16, 2, 256, {{100, 37, 0}}});
    run({24, 4, 256, {{70, 300, 0}}});
}

TEST_P(CudaPrefillAttention, RaggedBatchWithDecodeRows) {
    run({8, 8, 64, {{1, 200, 0}, {90, 0, 1}, {17, 5, 2}, {1, 0, 3}, {64, 64, 4}}});
}

TEST_P(CudaPrefillAttention, LongPrompt) {
    run({16, 2, 256, {{300, 0, 0}}});
}

TEST_P(CudaPrefillAttention, SeveralPromptsAfterCachedContexts) {
    // A serving step's shape: prompt chunks of different lengths, some after cached prefixes,
    // with decode rows between them; 27B heads.
    run({24, 4, 256, {{130, 0, 0}, {1, 40, 1}, {64, 512, 2}, {200, 17, 3}, {1, 3, 4}}});
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaPrefillAttention,
                         ::testing::Values(ops::kRouteFlash, ops::kRouteCudnn),
                         [](const ::testing::TestParamInfo<int>& kernel) {
                             return std::string(kernel.param == ops::kRouteCudnn ? "cudnn"
                                                                                 : "flash");
                         });

// The sabotage arm: cuDNN run with every sequence one key short must fail the comparison that
// the cases above pass, so a route that drops the diagonal key cannot pass them.
TEST(CudaPrefillAttentionSabotage, CudnnOneKeyShortIsCaught) {
    ASSERT_TRUE(ops::cuda::cudnn_available()) << "cuDNN route: " << ops::cuda::cudnn_status();
    ForcedRoute kernel(ops::RouteId::AttentionPrefillBf16, ops::kRouteCudnn);
    const uint64_t before = ops::cuda::cudnn_prefill_runs();
    ops::cuda::set_cudnn_prefill_sabotage(true);
    std::string what;
    const bool close = run_case({16, 2, 256, {{100, 37, 0}}}, &what);
    ops::cuda::set_cudnn_prefill_sabotage(false);
    EXPECT_GT(ops::cuda::cudnn_prefill_runs(), before);
    EXPECT_FALSE(close) << "one key short went unnoticed";
}

} // namespace
} // namespace ninfer::test
