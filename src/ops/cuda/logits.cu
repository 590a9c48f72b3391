// Implements ops/logits.h on CUDA in two stages, so one row spreads over many SMs:
//   lse_top_k_split: grid (R, splits); each block reduces a chunk of its row to a partial
//     (chunk max m_b, sum of exp(l - m_b) in f64) and, when k > 0, its chunk's top k ranks;
//   lse_top_k_merge: one block per row merges the partials into lse = M + log(sum_b s_b e^(m_b-M))
//     and the row's top k by a k-way merge of the chunks' sorted candidate lists.
// Ranks order by value, then lower id (select.cuh), so the top k is exact, ties included.
#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/select.cuh"

namespace ninfer::ops::cuda {
namespace {

// The k best ranks among ids [begin, end) of l, best first; 0 (below every real rank) once the
// chunk has fewer than k ids. Each pass takes the best rank below the previous pick. Written by
// thread 0 to out[0..k).
__device__ void chunk_top_k(const float* l, int64_t begin, int64_t end, int k, uint64_t* out) {
    uint64_t previous = ~0ull; // picks must rank strictly below this
    for (int j = 0; j < k; ++j) {
        uint64_t best = 0;
        for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
            const uint64_t rank = rank_of(l[v], v);
            if (rank < previous && rank > best) best = rank;
        }
        best = block_max_u64(best);
        previous = best;
        if (threadIdx.x == 0) out[j] = best;
    }
}

// Implements stage 1 of logprobs_top_k; chosen for every row (grid (R, splits), kSplitThreads).
// partial[r * splits + s] = (m_b, s_b); cand[(r * splits + s) * k + j]: the chunk's j-th rank.
__global__ void __launch_bounds__(kSplitThreads)
    lse_top_k_split(const float* logits, int64_t l_s0, int64_t V, int64_t limit, int64_t chunk,
                    int k, double2* partial, uint64_t* cand) {
    pdl_wait_and_release();
    const int64_t r = blockIdx.x, split = blockIdx.y, part = r * gridDim.y + split;
    const float* l = logits + r * l_s0;
    const int64_t begin = split * chunk, end = min(V, begin + chunk);
    float m = -FLT_MAX;
#pragma unroll 4
    for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) m = fmaxf(m, l[v]);
    m = block_max(m);
    double sum = 0.0;
#pragma unroll 4
    for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x)
        sum += exp(double(l[v]) - double(m));
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[part] = make_double2(double(m), sum);
    if (k > 0) chunk_top_k(l, begin, min(end, limit), k, cand + part * k);
}

// Implements stage 2 of logprobs_top_k: one block of kMaxSplits threads per row, thread s holding
// split s. The top k is a k-way merge: each thread's head is the best unpicked rank of its split
// (the lists are sorted), the block max of the heads is the next pick, and its owner advances.
__global__ void __launch_bounds__(kMaxSplits)
    lse_top_k_merge(const double2* partial, const uint64_t* cand, int splits, int k, float* lse,
                    int32_t* ids, int64_t ids_s0, float* lp, int64_t lp_s0) {
    pdl_wait_and_release();
    const int64_t r = blockIdx.x;
    const int s = threadIdx.x;
    const double2 p = s < splits ? partial[r * splits + s] : make_double2(-DBL_MAX, 0.0);
    const double m = block_max(p.x);
    // As stored (logits.h): the logprobs subtract the f32 lse.
    const double log_z = double(float(m + log(block_sum(s < splits ? p.y * exp(p.x - m) : 0.0))));
    if (threadIdx.x == 0) lse[r] = float(log_z);
    const uint64_t* list = cand + (r * splits + s) * k;
    int taken = 0;
    uint64_t head = (s < splits && k > 0) ? list[0] : 0;
    for (int j = 0; j < k; ++j) {
        const uint64_t best = block_max_u64(head);
        if (best != 0 && head == best) head = ++taken < k ? list[taken] : 0; // ranks are unique
        if (threadIdx.x == 0) {
            ids[r * ids_s0 + j] = int32_t(rank_id(best));
            lp[r * lp_s0 + j] = float(double(key_value(uint32_t(best >> 32))) - log_z);
        }
    }
}

} // namespace

void logprobs_top_k(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs) {
    const int64_t R = logits.size(0), V = logits.size(1);
    if (R == 0) return;
    const int k = ids.empty() ? 0 : int(ids.size(1));
    const int splits = splits_for(V);
    Allocator& alloc = allocator(ctx.device);
    Tensor partial = Tensor::empty(alloc, DType::F64, {R * splits * 2});
    Tensor cand; // [R, splits, k] ranks, only when k > 0
    if (k > 0) cand = Tensor::empty(alloc, DType::I64, {R * splits * k});
    auto* partial_p = reinterpret_cast<double2*>(partial.ptr<double>());
    auto* cand_p = k > 0 ? reinterpret_cast<uint64_t*>(cand.ptr<int64_t>()) : nullptr;
    launch_pdl(ctx, lse_top_k_split, dim3(unsigned(R), unsigned(splits)), dim3(kSplitThreads), 0,
               logits.ptr<float>(), logits.stride[0], V, vocab_limit, split_chunk(V, splits), k,
               partial_p, cand_p);
    check_launch("lse_top_k_split");
    launch_pdl(ctx, lse_top_k_merge, dim3(unsigned(R)), dim3(kMaxSplits), 0,
               static_cast<const double2*>(partial_p), static_cast<const uint64_t*>(cand_p), splits,
               k, lse.ptr<float>(), k ? ids.ptr<int32_t>() : nullptr, k ? ids.stride[0] : 0,
               k ? logprobs.ptr<float>() : nullptr, k ? logprobs.stride[0] : 0);
    check_launch("lse_top_k_merge");
}

} // namespace ninfer::ops::cuda
