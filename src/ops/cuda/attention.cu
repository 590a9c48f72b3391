// Implements ops/attention.h on CUDA.
// kv_cache_write: one block per (sequence, row slot), threads over kv heads x head dim.
// paged_attention (any T, head dim <= 256): a block per (row, query head, key split); 4 warps
// split the block's keys, each keeps an online softmax (running max, sum, and its share of the
// output in registers: lane l owns dims l, l+32, ...), and the warps merge through shared memory.
// Chosen split-K (flash-decoding) when few rows run: splits write partials that a second kernel
// merges; otherwise one split writes the output directly. Prompt chunks of kFlashMinRows rows
// or more in bf16 take the tensor-core route instead (attention_flash.cu).
#include <algorithm>
#include <cfloat>

#include "ops/cuda/attention_flash.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxDimPerLane = 8; // head dim <= 256
constexpr int kWarps = 4;

struct PagedArgs {
    const int32_t *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size;
    int64_t cache_s0, cache_s1, cache_s2; // [NB, bs, nKV, D] strides
};

__device__ __forceinline__ int64_t cache_offset(const PagedArgs& a, int s, int64_t p, int kvh) {
    const int32_t block = a.block_table[int64_t(s) * a.block_table_stride + p / a.block_size];
    return block * a.cache_s0 + (p % a.block_size) * a.cache_s1 + kvh * a.cache_s2;
}

template <typename T>
__global__ void cache_write_kernel(PagedArgs a, const T* k, const T* v, int64_t k_s0, int64_t k_s1,
                                   int64_t v_s0, int64_t v_s1, int nKV, int D, T* kc, T* vc,
                                   int max_rows) {
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const int64_t r = r0 + i, p = a.pos_begin[s] + i;
    for (int e = threadIdx.x; e < nKV * D; e += blockDim.x) {
        const int h = e / D, d = e % D;
        const int64_t off = cache_offset(a, s, p, h) + d;
        kc[off] = k[r * k_s0 + h * k_s1 + d];
        vc[off] = v[r * v_s0 + h * v_s1 + d];
    }
}

template <typename T>
__global__ void attention_kernel(PagedArgs a, const T* q, int64_t q_s0, int64_t q_s1, const T* kc,
                                 const T* vc, int group, int D, float scale, T* out, int64_t o_s0,
                                 int64_t o_s1, int max_rows, float* partials) {
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows, h = blockIdx.y;
    const int split = blockIdx.z, splits = gridDim.z;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const int64_t r = r0 + i, p = a.pos_begin[s] + i;
    const int kvh = h / group, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float qd[kMaxDimPerLane], acc[kMaxDimPerLane];
#pragma unroll
    for (int m = 0; m < kMaxDimPerLane; ++m) {
        const int d = lane + 32 * m;
        qd[m] = d < D ? to_float(q[r * q_s0 + h * q_s1 + d]) * scale : 0.0f;
        acc[m] = 0.0f;
    }
    // This block's share of the keys [0, p]: one of `splits` equal ranges.
    const int64_t per_split = (p + splits) / splits; // ceil((p + 1) / splits)
    const int64_t key_begin = split * per_split, key_end = min(p + 1, key_begin + per_split);
    float run_max = -FLT_MAX, run_sum = 0.0f;
    for (int64_t tau = key_begin + warp; tau < key_end; tau += kWarps) {
        const int64_t off = cache_offset(a, s, tau, kvh);
        float dot = 0.0f;
#pragma unroll
        for (int m = 0; m < kMaxDimPerLane; ++m) {
            const int d = lane + 32 * m;
            if (d < D) dot += qd[m] * to_float(kc[off + d]);
        }
        const float score = warp_sum(dot);
        const float new_max = fmaxf(run_max, score);
        const float correction = __expf(run_max - new_max), w = __expf(score - new_max);
        run_sum = run_sum * correction + w;
#pragma unroll
        for (int m = 0; m < kMaxDimPerLane; ++m) {
            const int d = lane + 32 * m;
            acc[m] = acc[m] * correction + (d < D ? w * to_float(vc[off + d]) : 0.0f);
        }
        run_max = new_max;
    }
    __shared__ float s_max[kWarps], s_sum[kWarps], s_acc[kWarps][32 * kMaxDimPerLane];
    if (lane == 0) {
        s_max[warp] = run_max;
        s_sum[warp] = run_sum;
    }
#pragma unroll
    for (int m = 0; m < kMaxDimPerLane; ++m) s_acc[warp][lane + 32 * m] = acc[m];
    __syncthreads();
    float total_max = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, s_max[w]);
    float total_sum = 0.0f;
    for (int w = 0; w < kWarps; ++w)
        if (s_sum[w] > 0.0f) total_sum += s_sum[w] * __expf(s_max[w] - total_max);
    if (partials) { // split-K: leave (max, sum, unnormalised acc) for the combine kernel
        float* part = partials + ((int64_t(blockIdx.x) * gridDim.y + h) * splits + split) * (D + 2);
        if (threadIdx.x == 0) {
            part[0] = total_max;
            part[1] = total_sum;
        }
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < kWarps; ++w)
                if (s_sum[w] > 0.0f) v += s_acc[w][d] * __expf(s_max[w] - total_max);
            part[2 + d] = v;
        }
        return;
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w)
            if (s_sum[w] > 0.0f) v += s_acc[w][d] * __expf(s_max[w] - total_max);
        out[r * o_s0 + h * o_s1 + d] = from_float<T>(v / total_sum);
    }
}

// Merges the split-K partials of one (row, head): out = sum_s e^{m_s - M} acc_s / sum_s e^{m_s - M}
// l_s.
template <typename T>
__global__ void combine_splits(PagedArgs a, const float* partials, int splits, int D, T* out,
                               int64_t o_s0, int64_t o_s1, int max_rows) {
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows, h = blockIdx.y;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const float* base = partials + (int64_t(blockIdx.x) * gridDim.y + h) * splits * (D + 2);
    float m = -FLT_MAX;
    for (int k = 0; k < splits; ++k)
        if (base[k * (D + 2) + 1] > 0.0f) m = fmaxf(m, base[k * (D + 2)]);
    float l = 0.0f;
    for (int k = 0; k < splits; ++k)
        if (base[k * (D + 2) + 1] > 0.0f)
            l += base[k * (D + 2) + 1] * __expf(base[k * (D + 2)] - m);
    const int64_t r = r0 + i;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int k = 0; k < splits; ++k)
            if (base[k * (D + 2) + 1] > 0.0f)
                v += base[k * (D + 2) + 2 + d] * __expf(base[k * (D + 2)] - m);
        out[r * o_s0 + h * o_s1 + d] = from_float<T>(v / l);
    }
}

// Splits of the key range per (row, head): enough blocks to cover the SMs twice when few rows
// run (decode), one block per (row, head) otherwise. The count depends on the row and head
// counts only, not on the context, so a graph captured at one context length replays the same
// arithmetic at another (splits with no keys exit at once).
constexpr int kTargetBlocks = 264; // 2 x 132 SMs of an H200
constexpr int kMaxSplits = 64;
int choose_splits(int64_t row_heads) {
    if (row_heads >= kTargetBlocks) return 1;
    return int(std::min<int64_t>((kTargetBlocks + row_heads - 1) / row_heads, kMaxSplits));
}

PagedArgs paged_args(const SeqBatch& b, const TensorView& cache) {
    return {b.row_begin.ptr<int32_t>(),
            b.pos_begin.ptr<int32_t>(),
            b.block_table.ptr<int32_t>(),
            b.block_table_stride,
            b.block_size,
            cache.stride[0],
            cache.stride[1],
            cache.stride[2]};
}

} // namespace

void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const TensorView& k_cache, const TensorView& v_cache) {
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    const unsigned grid = unsigned(batch.num_seqs * batch.max_rows_per_seq);
    dispatch_float(k.dtype, "kv_cache_write", [&](auto tag) {
        using E = decltype(tag);
        cache_write_kernel<E><<<grid, 256, 0, stream_of(ctx)>>>(
            paged_args(batch, k_cache), k.ptr<E>(), v.ptr<E>(), k.stride[0], k.stride[1],
            v.stride[0], v.stride[1], int(k.size(1)), int(k.size(2)), k_cache.ptr<E>(),
            v_cache.ptr<E>(), batch.max_rows_per_seq);
    });
    check_launch("cache_write_kernel");
}

void paged_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                     const TensorView& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out) {
    const int D = int(q.size(2));
    require(D <= 32 * kMaxDimPerLane, "paged_attention: CUDA supports head dim <= 256, got ", D);
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    if (batch.max_rows_per_seq >= kFlashMinRows && flash_prefill_supported(q, k_cache, out))
        return flash_prefill(ctx, q, k_cache, v_cache, batch, scale, out);
    const int group = int(q.size(1) / k_cache.size(2));
    const int64_t row_slots = int64_t(batch.num_seqs) * batch.max_rows_per_seq;
    const int splits = choose_splits(int64_t(batch.num_rows) * q.size(1));
    const dim3 grid(unsigned(row_slots), unsigned(q.size(1)), unsigned(splits));
    Tensor partials;
    if (splits > 1)
        partials = Tensor::empty(allocator(ctx.device), DType::F32,
                                 {row_slots * q.size(1) * splits * (D + 2)});
    dispatch_float(q.dtype, "paged_attention", [&](auto tag) {
        using E = decltype(tag);
        attention_kernel<E><<<grid, 32 * kWarps, 0, stream_of(ctx)>>>(
            paged_args(batch, k_cache), q.ptr<E>(), q.stride[0], q.stride[1], k_cache.ptr<E>(),
            v_cache.ptr<E>(), group, D, scale, out.ptr<E>(), out.stride[0], out.stride[1],
            batch.max_rows_per_seq, splits > 1 ? partials.ptr<float>() : nullptr);
        check_launch("attention_kernel");
        if (splits > 1) {
            combine_splits<E>
                <<<dim3(unsigned(row_slots), unsigned(q.size(1))), 128, 0, stream_of(ctx)>>>(
                    paged_args(batch, k_cache), partials.ptr<float>(), splits, D, out.ptr<E>(),
                    out.stride[0], out.stride[1], batch.max_rows_per_seq);
            check_launch("combine_splits");
        }
    });
}

} // namespace ninfer::ops::cuda
