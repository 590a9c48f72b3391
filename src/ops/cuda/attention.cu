// Implements ops/attention.h on CUDA.
// kv_cache_write: one block per (sequence, row slot), threads over kv heads x head dim.
// paged_attention (any T, head dim <= 256): a block per (row, head group, key split), a head group
// being up to 8 query heads that share a KV head (GQA), so each key is read once per group; 4
// warps split the block's keys, each keeps an online softmax per head (running max, sum, and its
// share of the output in registers: lane l owns dims [8l, 8l + 8), read with 16-byte loads), and
// the warps merge through shared memory.
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

constexpr int kMaxDim = 256; // 32 lanes x 8 dims
constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;       // query heads per block (Qwen3.6: 8 for 35B-A3B, 6 for 27B)
constexpr int kKeysPerStep = 2;    // keys a warp loads before using any: 2 x 2 x 16 bytes a lane
constexpr int kTargetBlocks = 264; // split-K: 2 x 132 SMs of an H200
constexpr int kMaxSplits = 64;
constexpr int kCombineThreads = 128; // >= kMaxSplits: one thread per split in the merge
static_assert(kCombineThreads >= kMaxSplits);

struct PagedArgs {
    const int32_t *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size;
    int num_heads;                        // query heads (partials layout)
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
    pdl_wait_and_release();
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

// Loads 8 consecutive elements [d0, d0 + 8) of a row as floats, zeros past D. vec: 16-byte loads
// are legal (D % 8 == 0, 16-byte aligned rows), decided once on the host.
template <typename T>
__device__ __forceinline__ void load8(const T* row, int d0, int D, bool vec, float (&v)[8]) {
    if (vec && d0 < D) {
        if constexpr (sizeof(T) == 2) {
            const uint4 raw = *reinterpret_cast<const uint4*>(row + d0);
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __bfloat1622float2(h[j]);
                v[2 * j] = f.x;
                v[2 * j + 1] = f.y;
            }
        } else {
            const float4 a = *reinterpret_cast<const float4*>(row + d0);
            const float4 b = *reinterpret_cast<const float4*>(row + d0 + 4);
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
            v[7] = b.w;
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = d0 + j < D ? to_float(row[d0 + j]) : 0.0f;
}

// Online-softmax state of one query head in one warp: lane l owns dims [8l, 8l + 8).
struct HeadState {
    float max = -FLT_MAX, sum = 0.0f, acc[8] = {};
};

// Grid (row slot, head group, split); a head group is up to kMaxGroup query heads sharing one KV
// head, so each key and value row is read once for all of them. Each warp takes every kWarps-th
// run of kKeysPerStep keys of the block's split, all their K and V loads in flight at once.
template <typename T>
__global__ void __launch_bounds__(32 * kWarps)
    attention_kernel(PagedArgs a, const T* q, int64_t q_s0, int64_t q_s1, const T* kc, const T* vc,
                     int group, int D, bool vec, float scale, T* out, int64_t o_s0, int64_t o_s1,
                     int max_rows, float* partials) {
    pdl_wait_and_release();
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows;
    const int split = blockIdx.z, splits = gridDim.z;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const int64_t r = r0 + i, p = a.pos_begin[s] + i;
    // Head group -> kv head and its query heads [h0, h0 + G).
    const int chunks = (group + kMaxGroup - 1) / kMaxGroup;
    const int kvh = blockIdx.y / chunks, h0 = kvh * group + (blockIdx.y % chunks) * kMaxGroup;
    const int G = min(kMaxGroup, kvh * group + group - h0);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d0 = lane * 8;
    float qd[kMaxGroup][8];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
        if (g < G) load8(q + r * q_s0 + (h0 + g) * q_s1, d0, D, vec, qd[g]);
#pragma unroll
        for (int j = 0; j < 8; ++j) qd[g][j] = g < G ? qd[g][j] * scale : 0.0f;
    }
    HeadState st[kMaxGroup];
    // This block's share of the keys [0, p]: one of `splits` equal ranges.
    const int64_t per_split = (p + splits) / splits; // ceil((p + 1) / splits)
    const int64_t key_begin = split * per_split, key_end = min(p + 1, key_begin + per_split);
    for (int64_t t0 = key_begin + warp * kKeysPerStep; t0 < key_end; t0 += kWarps * kKeysPerStep) {
        float kv[kKeysPerStep][8], vv[kKeysPerStep][8];
#pragma unroll
        for (int u = 0; u < kKeysPerStep; ++u) {
            const bool live = t0 + u < key_end;
            const int64_t off = cache_offset(a, s, live ? t0 + u : t0, kvh);
            load8(kc + off, live ? d0 : D, D, vec, kv[u]);
            load8(vc + off, live ? d0 : D, D, vec, vv[u]);
        }
        // All scores of the step first (independent warp sums), then one rescale per head.
        const int live = int(min(int64_t(kKeysPerStep), key_end - t0));
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
            if (g >= G) break;
            float score[kKeysPerStep];
            float step_max = -FLT_MAX;
#pragma unroll
            for (int u = 0; u < kKeysPerStep; ++u) {
                float dot = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) dot += qd[g][j] * kv[u][j];
                score[u] = warp_sum(dot);
                if (u < live) step_max = fmaxf(step_max, score[u]);
            }
            const float new_max = fmaxf(st[g].max, step_max);
            const float correction = __expf(st[g].max - new_max);
            st[g].sum *= correction;
#pragma unroll
            for (int j = 0; j < 8; ++j) st[g].acc[j] *= correction;
#pragma unroll
            for (int u = 0; u < kKeysPerStep; ++u) {
                const float w = u < live ? __expf(score[u] - new_max) : 0.0f;
                st[g].sum += w;
#pragma unroll
                for (int j = 0; j < 8; ++j) st[g].acc[j] += w * vv[u][j];
            }
            st[g].max = new_max;
        }
    }
    // Merge the warps through shared memory, one head at a time.
    __shared__ float s_max[kWarps], s_sum[kWarps], s_acc[kWarps][256];
    for (int g = 0; g < G; ++g) {
        if (lane == 0) {
            s_max[warp] = st[g].max;
            s_sum[warp] = st[g].sum;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) s_acc[warp][d0 + j] = st[g].acc[j];
        __syncthreads();
        float total_max = -FLT_MAX;
        for (int w = 0; w < kWarps; ++w)
            if (s_sum[w] > 0.0f) total_max = fmaxf(total_max, s_max[w]);
        float total_sum = 0.0f;
        for (int w = 0; w < kWarps; ++w)
            if (s_sum[w] > 0.0f) total_sum += s_sum[w] * __expf(s_max[w] - total_max);
        const int h = h0 + g;
        if (partials) { // split-K: leave (max, sum, unnormalised acc) for the combine kernel
            float* part =
                partials + ((int64_t(blockIdx.x) * a.num_heads + h) * splits + split) * (D + 2);
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
        } else {
            for (int d = threadIdx.x; d < D; d += blockDim.x) {
                float v = 0.0f;
                for (int w = 0; w < kWarps; ++w)
                    if (s_sum[w] > 0.0f) v += s_acc[w][d] * __expf(s_max[w] - total_max);
                out[r * o_s0 + h * o_s1 + d] = from_float<T>(v / total_sum);
            }
        }
        __syncthreads(); // s_* are reused by the next head
    }
}

// Merges the split-K partials of one (row, head): out = sum_s e^{m_s - M} acc_s / sum_s e^{m_s - M}
// l_s. Thread k reads split k's (m, l), so the weights come from two block reductions instead of a
// serial pass over the splits; then each thread sums its dims over the splits (coalesced rows).
template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    combine_splits(PagedArgs a, const float* partials, int splits, int D, T* out, int64_t o_s0,
                   int64_t o_s1, int max_rows) {
    pdl_wait_and_release();
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows, h = blockIdx.y;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const float* base = partials + (int64_t(blockIdx.x) * gridDim.y + h) * splits * (D + 2);
    const int k = threadIdx.x;
    const float l_k = k < splits ? base[k * (D + 2) + 1] : 0.0f;
    const float m_k = l_k > 0.0f ? base[k * (D + 2)] : -FLT_MAX; // empty splits weigh nothing
    const float m = block_max(m_k);
    const float w_k = l_k > 0.0f ? __expf(m_k - m) : 0.0f;
    const float l = block_sum(l_k * w_k);
    __shared__ float weight[kMaxSplits];
    if (k < splits) weight[k] = w_k / l;
    __syncthreads();
    const int64_t r = r0 + i;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
#pragma unroll 8
        for (int j = 0; j < splits; ++j) v += base[j * (D + 2) + 2 + d] * weight[j];
        out[r * o_s0 + h * o_s1 + d] = from_float<T>(v);
    }
}

// Splits of the key range per (row, head group): enough blocks to cover the SMs twice when few
// rows run (decode), one block per (row, head group) otherwise. The count depends on the row and
// head counts only, not on the context, so a graph captured at one context length replays the same
// arithmetic at another (splits with no keys exit at once).
int choose_splits(int64_t row_groups) {
    if (row_groups >= kTargetBlocks) return 1;
    return int(std::min<int64_t>((kTargetBlocks + row_groups - 1) / row_groups, kMaxSplits));
}

PagedArgs paged_args(const SeqBatch& b, const TensorView& cache, int num_heads = 0) {
    return {b.row_begin.ptr<int32_t>(),
            b.pos_begin.ptr<int32_t>(),
            b.block_table.ptr<int32_t>(),
            b.block_table_stride,
            b.block_size,
            num_heads,
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
        launch_pdl(ctx, cache_write_kernel<E>, grid, 256, 0, paged_args(batch, k_cache), k.ptr<E>(),
                   v.ptr<E>(), k.stride[0], k.stride[1], v.stride[0], v.stride[1], int(k.size(1)),
                   int(k.size(2)), k_cache.ptr<E>(), v_cache.ptr<E>(), batch.max_rows_per_seq);
    });
    check_launch("cache_write_kernel");
}

void paged_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                     const TensorView& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out) {
    const int D = int(q.size(2));
    require(D <= kMaxDim, "paged_attention: CUDA supports head dim <= ", kMaxDim, ", got ", D);
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    if (batch.max_rows_per_seq >= kFlashMinRows && flash_prefill_supported(q, k_cache, out))
        return flash_prefill(ctx, q, k_cache, v_cache, batch, scale, out);
    const int64_t nH = q.size(1), nKV = k_cache.size(2);
    const int group = int(nH / nKV);
    const int64_t head_groups = nKV * ((group + kMaxGroup - 1) / kMaxGroup);
    const int64_t row_slots = int64_t(batch.num_seqs) * batch.max_rows_per_seq;
    const int splits = choose_splits(int64_t(batch.num_rows) * head_groups);
    const dim3 grid{unsigned(row_slots), unsigned(head_groups), unsigned(splits)};
    const bool vec = D % 8 == 0 && q.stride[0] % 8 == 0 && q.stride[1] % 8 == 0 &&
                     k_cache.stride[2] % 8 == 0 && v_cache.stride[2] % 8 == 0 &&
                     reinterpret_cast<uintptr_t>(q.data) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(k_cache.data) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(v_cache.data) % 16 == 0;
    Tensor partials;
    if (splits > 1)
        partials = Tensor::empty(allocator(ctx.device), DType::F32,
                                 {row_slots * q.size(1) * splits * (D + 2)});
    dispatch_float(q.dtype, "paged_attention", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, attention_kernel<E>, grid, 32 * kWarps, 0,
                   paged_args(batch, k_cache, int(nH)), q.ptr<E>(), q.stride[0], q.stride[1],
                   k_cache.ptr<E>(), v_cache.ptr<E>(), group, D, vec, scale, out.ptr<E>(),
                   out.stride[0], out.stride[1], batch.max_rows_per_seq,
                   splits > 1 ? partials.ptr<float>() : nullptr);
        check_launch("attention_kernel");
        if (splits > 1) {
            launch_pdl(ctx, combine_splits<E>, dim3(unsigned(row_slots), unsigned(q.size(1))),
                       kCombineThreads, 0, paged_args(batch, k_cache), partials.ptr<float>(),
                       splits, D, out.ptr<E>(), out.stride[0], out.stride[1],
                       batch.max_rows_per_seq);
            check_launch("combine_splits");
        }
    });
}

} // namespace ninfer::ops::cuda
