// Implements ops/attention.h on CUDA.
// kv_cache_write: one block per (sequence, row slot), threads over kv heads x head dim.
// paged_attention (any T, head dim <= 256): one block per (row, query head); 4 warps split the
// keys 0..p, each keeps an online softmax (running max, sum, and its share of the output in
// registers: lane l owns dims l, l+32, ...), and the warps merge through shared memory.
#include <cfloat>

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
__global__ void cache_write_kernel(PagedArgs a, const T* k, const T* v, int64_t k_s0,
                                   int64_t k_s1, int64_t v_s0, int64_t v_s1, int nKV, int D,
                                   T* kc, T* vc, int max_rows) {
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
__global__ void attention_kernel(PagedArgs a, const T* q, int64_t q_s0, int64_t q_s1,
                                 const T* kc, const T* vc, int group, int D, float scale, T* out,
                                 int64_t o_s0, int64_t o_s1, int max_rows) {
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows, h = blockIdx.y;
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
    float run_max = -FLT_MAX, run_sum = 0.0f;
    for (int64_t tau = warp; tau <= p; tau += kWarps) {
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
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w)
            if (s_sum[w] > 0.0f) v += s_acc[w][d] * __expf(s_max[w] - total_max);
        out[r * o_s0 + h * o_s1 + d] = from_float<T>(v / total_sum);
    }
}

PagedArgs paged_args(const SeqBatch& b, const TensorView& cache) {
    return {b.row_begin.ptr<int32_t>(), b.pos_begin.ptr<int32_t>(), b.block_table.ptr<int32_t>(),
            b.block_table_stride, b.block_size, cache.stride[0], cache.stride[1],
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
    const int group = int(q.size(1) / k_cache.size(2));
    const dim3 grid(unsigned(batch.num_seqs * batch.max_rows_per_seq), unsigned(q.size(1)));
    dispatch_float(q.dtype, "paged_attention", [&](auto tag) {
        using E = decltype(tag);
        attention_kernel<E><<<grid, 32 * kWarps, 0, stream_of(ctx)>>>(
            paged_args(batch, k_cache), q.ptr<E>(), q.stride[0], q.stride[1], k_cache.ptr<E>(),
            v_cache.ptr<E>(), group, D, scale, out.ptr<E>(), out.stride[0], out.stride[1],
            batch.max_rows_per_seq);
    });
    check_launch("attention_kernel");
}

} // namespace ninfer::ops::cuda
