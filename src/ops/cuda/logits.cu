// Implements ops/logits.h on CUDA: one block per row. The log-sum-exp sums in f64; the top k
// come from k passes, each taking the best element ranked after the previous pick (ranks order
// by value, then lower id), so no membership test is needed.
#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/select.cuh"

namespace ninfer::ops::cuda {
namespace {

__global__ void logprobs_kernel(const float* logits, int64_t l_s0, int64_t V, int64_t limit, int k,
                                float* lse, int32_t* ids, int64_t ids_s0, float* lp,
                                int64_t lp_s0) {
    const int64_t r = blockIdx.x;
    const float* l = logits + r * l_s0;
    float m = -FLT_MAX;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, l[v]);
    m = block_max(m);
    double sum = 0.0;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) sum += exp(double(l[v]) - double(m));
    const double log_z = double(m) + log(block_sum(sum));
    if (threadIdx.x == 0) lse[r] = float(log_z);
    uint64_t previous = ~0ull; // picks must rank strictly below this
    for (int j = 0; j < k; ++j) {
        uint64_t best = 0;
        for (int64_t v = threadIdx.x; v < limit; v += blockDim.x) {
            const uint64_t rank = rank_of(l[v], v);
            if (rank < previous && rank > best) best = rank;
        }
        best = block_max_u64(best);
        previous = best;
        if (threadIdx.x == 0) {
            const int64_t id = rank_id(best);
            ids[r * ids_s0 + j] = int32_t(id);
            lp[r * lp_s0 + j] = float(double(l[id]) - log_z);
        }
    }
}

} // namespace

void logprobs_top_k(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs) {
    const int64_t R = logits.size(0);
    if (R == 0) return;
    const int k = ids.empty() ? 0 : int(ids.size(1));
    logprobs_kernel<<<unsigned(R), 1024, 0, stream_of(ctx)>>>(
        logits.ptr<float>(), logits.stride[0], logits.size(1), vocab_limit, k, lse.ptr<float>(),
        k ? ids.ptr<int32_t>() : nullptr, k ? ids.stride[0] : 0,
        k ? logprobs.ptr<float>() : nullptr, k ? logprobs.stride[0] : 0);
    check_launch("logprobs_kernel");
}

} // namespace ninfer::ops::cuda
