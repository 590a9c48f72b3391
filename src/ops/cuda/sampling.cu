// Implements apply_penalties and sample_tokens (ops/sampling.h) on CUDA, following the CPU
// definitions. sample_tokens runs in two stages: argmax_split reduces each chunk of a row (many
// blocks per row, select.cuh's splits) to its best rank, or kNonFiniteChunk; sample_kernel (one
// block per row) merges them, which settles greedy and non-finite rows at once; the other rows
// then sample in that block: thresholds by binary search over ordered keys (top-k on the logits'
// float keys, top-p on the f64 probabilities' bits), probabilities and sums in f64, a draft's
// accept test and residual by thread 0 over the row's probabilities, and the token is the first
// id whose running sum exceeds u * total.
#include <cub/block/block_scan.cuh>

#include <cfloat>

#include "core/philox.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/select.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kThreads = 256; // one block per row; f64 scan state limits the block size
static_assert(kThreads >= kMaxSplits, "sample_kernel merges one split partial per thread");

// The partial of a chunk holding a NaN or an infinity: above every finite value's rank (finite
// keys are below order_key(+inf) << 32), so the merged maximum flags the row.
constexpr uint64_t kNonFiniteChunk = ~0ull;

__global__ void penalties_kernel(float* logits, int64_t l_s0, const SamplingParamsRow* params,
                                 const int32_t* offsets, const int32_t* tokens,
                                 const int32_t* counts, const uint8_t* in_prompt) {
    const int64_t r = blockIdx.x;
    const SamplingParamsRow sp = params[r];
    float* l = logits + r * l_s0;
    for (int32_t i = offsets[r] + threadIdx.x; i < offsets[r + 1]; i += blockDim.x) {
        const int32_t count = counts[i];
        double v = l[tokens[i]];
        if ((count > 0 || in_prompt[i]) && sp.repetition_penalty != 1.0f)
            v = v > 0 ? v / sp.repetition_penalty : v * sp.repetition_penalty;
        v -= double(sp.frequency_penalty) * count;
        v -= double(sp.presence_penalty) * (count > 0 ? 1.0 : 0.0);
        l[tokens[i]] = float(v);
    }
}

// Count of elements with key >= threshold, over the block.
__device__ int64_t count_at_least(const float* l, int64_t n, uint32_t threshold) {
    int64_t c = 0;
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) c += order_key(l[v]) >= threshold;
    return block_sum(c);
}

// The key of the k-th largest logit: the largest key with count(key >= it) >= k.
__device__ uint32_t kth_largest_key(const float* l, int64_t n, int64_t k) {
    uint32_t lo = 0, hi = 0xffffffffu; // invariant: count(lo) >= k
    while (lo < hi) {
        // 64-bit: hi - lo + 1 overflows 32 bits on the first step.
        const uint32_t mid = uint32_t(lo + (uint64_t(hi) - lo + 1) / 2);
        if (count_at_least(l, n, mid) >= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ double mass_at_least(const double* p, int64_t n, uint64_t threshold_bits) {
    double m = 0.0;
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x)
        if (__double_as_longlong(p[v]) >= (long long)threshold_bits) m += p[v];
    return block_sum(m);
}

// t*: the largest probability (as non-negative double bits) whose kept mass reaches target.
__device__ uint64_t top_p_bits(const double* p, int64_t n, double target) {
    uint64_t lo = 0, hi = 0x7ff0000000000000ull; // positive doubles order like their bits
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (mass_at_least(p, n, mid) >= target)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// The first id whose running sum of p exceeds target (scan in id order, f64).
__device__ int64_t inverse_cdf(const double* p, int64_t n, double target) {
    using Scan = cub::BlockScan<double, kThreads>;
    __shared__ typename Scan::TempStorage scan_storage;
    __shared__ double carry;
    if (threadIdx.x == 0) carry = 0.0;
    __syncthreads();
    long long last_kept = -1;
    for (int64_t base = 0; base < n; base += blockDim.x) {
        const int64_t v = base + threadIdx.x;
        const double pv = v < n ? p[v] : 0.0;
        double inclusive;
        Scan(scan_storage).InclusiveSum(pv, inclusive);
        const double running = carry + inclusive;
        if (pv > 0.0) last_kept = v;
        const bool hit = pv > 0.0 && running > target;
        const long long first = -block_max<long long>(hit ? -v : -LLONG_MAX);
        if (threadIdx.x == blockDim.x - 1) carry = running;
        __syncthreads();
        if (first != LLONG_MAX) return first;
    }
    // Rounding left the target at the very top: the last kept id.
    return block_max<long long>(last_kept);
}

// Implements stage 1 of sample_tokens; chosen for every row (grid (R, splits), kSplitThreads).
// partial[r * splits + s]: the best rank of columns [s * chunk, (s + 1) * chunk) of [0, n), or
// kNonFiniteChunk when one of them is not finite.
__global__ void __launch_bounds__(kSplitThreads)
    argmax_split(const float* logits, int64_t l_s0, int64_t n, int64_t chunk, uint64_t* partial) {
    pdl_wait_and_release();
    const int64_t r = blockIdx.x, split = blockIdx.y;
    const float* l = logits + r * l_s0;
    const int64_t begin = split * chunk, end = min(n, begin + chunk);
    int bad = 0;
    uint64_t best = 0;
#pragma unroll 4
    for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
        const float x = l[v];
        bad |= !isfinite(x);
        const uint64_t rank = rank_of(x, v);
        best = rank > best ? rank : best;
    }
    bad = __syncthreads_or(bad);
    best = block_max_u64(best);
    if (threadIdx.x == 0) partial[r * gridDim.y + split] = bad ? kNonFiniteChunk : best;
}

// Stage 2's output for row r: tokens[r], status[r] and, when chosen is set, chosen[r] (the
// chosen_src logit of the token; NaN for a non-finite row). Thread 0 writes.
struct RowOutput {
    int32_t* tokens;
    int32_t* status;
    const float* chosen_src;
    int64_t c_s0;
    float* chosen;

    __device__ void finish(int64_t r, int64_t token) const {
        if (threadIdx.x != 0) return;
        tokens[r] = int32_t(token);
        status[r] = kSampleOk;
        if (chosen) chosen[r] = chosen_src[r * c_s0 + token];
    }
    __device__ void non_finite(int64_t r) const {
        if (threadIdx.x != 0) return;
        tokens[r] = -1;
        status[r] = kSampleNonFinite;
        if (chosen) chosen[r] = __int_as_float(0x7fc00000); // quiet NaN
    }
};

// The drafts argument of sample_tokens as the kernel reads it (draft == nullptr: none).
struct DraftArgs {
    const int32_t* draft;
    const int32_t* ids;
    const float* q;
    int64_t k, ids_s0, q_s0;
};

// Thread 0's half of a draft row (ops/sampling.h): the accept test over the kept weights p
// (sum total), else p turned into the residual max(0, p - q total) and total into its mass
// (both left as they are when rounding leaves the residual none). Returns true on acceptance.
__device__ bool accept_or_residual(const DraftArgs& d, int64_t r, int32_t draft,
                                   const SamplingParamsRow& sp, double* p, int64_t n,
                                   double& total) {
    const int32_t* ids = d.ids + r * d.ids_s0;
    const float* q = d.q + r * d.q_s0;
    double qd = 0.0;
    for (int64_t i = 0; i < d.k; ++i)
        if (ids[i] == draft) qd = q[i];
    const double a = philox_uniform(sp.seed, uint64_t(sp.position), kDraftAcceptStream);
    if (draft < n && a * qd * total < p[draft]) return true;
    double removed = 0.0;
    for (int64_t i = 0; i < d.k; ++i)
        if (ids[i] >= 0 && ids[i] < n) removed += fmin(p[ids[i]], double(q[i]) * total);
    if (total - removed <= total * 1e-12) return false; // no residual mass: sample p itself
    for (int64_t i = 0; i < d.k; ++i)
        if (ids[i] >= 0 && ids[i] < n) p[ids[i]] = fmax(0.0, p[ids[i]] - double(q[i]) * total);
    total -= removed;
    return false;
}

// Implements stage 2 of sample_tokens: one block per row (kThreads) merges the row's split
// partials; greedy and non-finite rows end there, the others sample over the whole row.
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int64_t l_s0, int64_t n, const SamplingParamsRow* params,
                  const uint64_t* partial, int splits, double* scratch, RowOutput out,
                  DraftArgs drafts) {
    pdl_wait_and_release();
    const int64_t r = blockIdx.x;
    const float* l = logits + r * l_s0;
    const SamplingParamsRow sp = params[r];
    const uint64_t best =
        block_max_u64(int(threadIdx.x) < splits ? partial[r * splits + threadIdx.x] : 0ull);
    if (best == kNonFiniteChunk) {
        out.non_finite(r);
        return;
    }
    if (sp.greedy || sp.temperature <= 0.0f) {
        out.finish(r, rank_id(best));
        return;
    }
    const double temperature = sp.temperature;
    const double max_scaled = double(l[rank_id(best)]) / temperature;
    const uint32_t cutoff = (sp.top_k > 0 && sp.top_k < n) ? kth_largest_key(l, n, sp.top_k) : 0u;
    double* p = scratch + r * n;
    double total = 0.0;
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
        p[v] = order_key(l[v]) >= cutoff ? exp(double(l[v]) / temperature - max_scaled) : 0.0;
        total += p[v];
    }
    total = block_sum(total);
    if (sp.top_p < 1.0f) {
        const uint64_t t = top_p_bits(p, n, double(sp.top_p) * total);
        double kept = 0.0;
        for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
            if (__double_as_longlong(p[v]) < (long long)t) p[v] = 0.0;
            kept += p[v];
        }
        total = block_sum(kept);
    }
    if (sp.min_p > 0.0f) {
        double pmax = 0.0;
        for (int64_t v = threadIdx.x; v < n; v += blockDim.x) pmax = fmax(pmax, p[v]);
        const double floor = double(sp.min_p) * block_max(pmax);
        double kept = 0.0;
        for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
            if (p[v] < floor) p[v] = 0.0;
            kept += p[v];
        }
        total = block_sum(kept);
    }
    __syncthreads(); // p fully written before the scan reads other threads' entries
    const int32_t draft = drafts.draft ? drafts.draft[r] : -1;
    if (draft >= 0) {
        __shared__ double residual_total;
        __shared__ int accepted;
        if (threadIdx.x == 0) {
            double t = total;
            accepted = accept_or_residual(drafts, r, draft, sp, p, n, t);
            residual_total = t;
        }
        __syncthreads(); // the decision and the residual's entries, for every thread
        if (accepted) {
            out.finish(r, draft);
            return;
        }
        total = residual_total;
    }
    const double target = philox_uniform(sp.seed, uint64_t(sp.position)) * total;
    out.finish(r, inverse_cdf(p, n, target));
}

} // namespace

void apply_penalties(const ExecContext& ctx, const TensorView& logits,
                     const SamplingParamsRow* params, const TensorView& offsets,
                     const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt) {
    const int64_t R = logits.size(0);
    if (R == 0 || tokens.size(0) == 0) return;
    penalties_kernel<<<unsigned(R), 256, 0, stream_of(ctx)>>>(
        logits.ptr<float>(), logits.stride[0], params, offsets.ptr<int32_t>(),
        tokens.ptr<int32_t>(), counts.ptr<int32_t>(), in_prompt.ptr<uint8_t>());
    check_launch("penalties_kernel");
}

void sample_tokens(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source,
                   const TensorView& chosen_logits, const SampleDrafts& drafts) {
    const int64_t R = logits.size(0);
    if (R == 0) return;
    DraftArgs draft_args{nullptr, nullptr, nullptr, 0, 0, 0};
    if (!drafts.empty())
        draft_args = {drafts.draft.ptr<int32_t>(), drafts.ids.ptr<int32_t>(), drafts.q.ptr<float>(),
                      drafts.ids.size(1),          drafts.ids.stride[0],      drafts.q.stride[0]};
    Allocator& alloc = allocator(ctx.device);
    const int splits = splits_for(vocab_limit);
    Tensor partial = Tensor::empty(alloc, DType::I64, {R * splits});
    // Probabilities of the sampled rows; the host cannot tell greedy rows (params live on the
    // device), so every row gets its slice. Pool allocations cost no device work.
    Tensor scratch = Tensor::empty(alloc, DType::F64, {R, vocab_limit});
    auto* partial_p = reinterpret_cast<uint64_t*>(partial.ptr<int64_t>());
    launch_pdl(ctx, argmax_split, dim3(unsigned(R), unsigned(splits)), dim3(kSplitThreads), 0,
               logits.ptr<float>(), logits.stride[0], vocab_limit, split_chunk(vocab_limit, splits),
               partial_p);
    check_launch("argmax_split");
    const bool gather = !chosen_logits.empty();
    const RowOutput out{
        tokens.ptr<int32_t>(), status.ptr<int32_t>(), gather ? chosen_source.ptr<float>() : nullptr,
        gather ? chosen_source.stride[0] : 0, gather ? chosen_logits.ptr<float>() : nullptr};
    launch_pdl(ctx, sample_kernel, dim3(unsigned(R)), dim3(kThreads), 0, logits.ptr<float>(),
               logits.stride[0], vocab_limit, params, static_cast<const uint64_t*>(partial_p),
               splits, scratch.ptr<double>(), out, draft_args);
    check_launch("sample_kernel");
}

} // namespace ninfer::ops::cuda
