// Implements ops/attention.h on CUDA.
// kv_cache_write: one block per (sequence, row slot), threads over kv heads x head dim; quantized
// planes a warp per (row, K or V, kv head), which encodes the row with the plane's codec.
// paged_attention (any T, head dim <= 256): a block per (row, head group, key split), a head group
// being up to 8 query heads that share a KV head (GQA), so each key is read once per group; the
// block stages 32 keys at a time in shared memory and each of its 8 warps keeps the online softmax
// of one of the group's heads (lane = key when scoring, lane = 8 dims when accumulating P V).
// Chosen split-K (flash-decoding) when few rows run: splits write partials that a second kernel
// merges; otherwise one split writes the output directly. Quantized planes run the same schedule
// over staged codes (attention_coded.cu). Prompt chunks of kFlashMinRows rows or more in bf16 take
// the tensor-core route instead (attention_flash.cu), quantized planes included, or cuDNN's fused
// attention where the route table's attention_prefill.bf16 gives it the rows (attention_cudnn.h;
// quantized planes through bf16 staging where attention_prefill.coded does,
// attention_cudnn_coded.cu).
#include <algorithm>
#include <cfloat>

#include "ops/cuda/attention_decode.cuh"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_flash.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/kv_plane.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

using namespace decode_attn;

// Keys staged per tile: one per lane when scoring; f32 stages half as many so that the block's
// static shared memory stays under 48 KB.
template <typename T> constexpr int kTileKeys = sizeof(T) == 2 ? 32 : 16;
constexpr int kBlocksPerSm = 2; // split-K target: two blocks on every SM of the device
constexpr int kCombineThreads = 256; // one thread per split in the merge, then one per dim
static_assert(kCombineThreads >= kMaxSplits && kCombineThreads >= kMaxDim);
constexpr int kCombineLoads = 16; // partial loads a merge thread has in flight

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

// Quantized planes: warp w of a row's block encodes (plane, kv head) pairs w, w + kEncodeWarps, ...
// (K heads, then V heads); lane l loads dims [8 l, 8 l + 8) element by element (any row stride,
// any D <= 256) and kvq::encode_row writes the codes and scales. `a` addresses the planes in rows.
constexpr int kEncodeWarps = 4;

template <typename T, typename Codec>
__global__ void __launch_bounds__(32 * kEncodeWarps)
    cache_encode_kernel(PagedArgs a, const T* k, const T* v, int64_t k_s0, int64_t k_s1,
                        int64_t v_s0, int64_t v_s1, int nKV, int D, kvq::CodedPlanes<Codec> kv,
                        int max_rows) {
    pdl_wait_and_release();
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const int64_t r = r0 + i, p = a.pos_begin[s] + i;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, G = Codec::groups(D);
    for (int pair = warp; pair < 2 * nKV; pair += kEncodeWarps) { // warp-uniform
        const bool is_v = pair >= nKV;
        const int h = is_v ? pair - nKV : pair;
        const T* src = is_v ? v + r * v_s0 + h * v_s1 : k + r * k_s0 + h * k_s1;
        float x[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int d = lane * 8 + e;
            x[e] = d < D ? to_float(src[d]) : 0.0f;
        }
        const int64_t row = cache_offset(a, s, p, h);
        kvq::encode_row<Codec>(x, D, lane, (is_v ? kv.v : kv.k) + row * D,
                               (is_v ? kv.v_scale : kv.k_scale) + row * G);
    }
}

// The block's shared memory: a tile of up to kTileKeys<T> keys (K and V rows of one KV head, padded
// so that lane j reading row j with 16-byte loads hits distinct banks) and the group's queries.
template <typename T> struct DecodeSmem {
    static constexpr int kPitch = kMaxDim + 16 / int(sizeof(T)); // elements; +16 bytes of padding
    T k[kTileKeys<T>][kPitch];
    T v[kTileKeys<T>][kPitch];
    float q[kMaxGroup][kMaxDim];
    int64_t row_offset[kTileKeys<T>]; // cache offset of each staged key's row
};

// 8 elements [d0, d0 + 8) of a staged row as floats (16-byte aligned; d0 % 8 == 0).
template <typename T> __device__ __forceinline__ void smem8(const T* row, int d0, float (&v)[8]) {
    if constexpr (sizeof(T) == 2) {
        bf16x8_to_float(*reinterpret_cast<const uint4*>(row + d0), v);
    } else {
        const float4 a = *reinterpret_cast<const float4*>(row + d0);
        const float4 b = *reinterpret_cast<const float4*>(row + d0 + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
        v[7] = b.w;
    }
}

// Copies the K and V rows of keys [t0, t0 + n) of KV head kvh into the tile, zero-padding each
// row from D to a multiple of 8. vec: 16-byte cp.async copies are legal (decided on the host).
template <typename T>
__device__ void stage_tile(const PagedArgs& a, int s, int64_t t0, int n, int kvh, const T* kc,
                           const T* vc, int D, bool vec, DecodeSmem<T>& sm) {
    constexpr int kPerChunk = 16 / int(sizeof(T));
    // Each row's cache offset first, one thread per row, so the copies below issue without a
    // dependent block-table load each (those serialised: ~0.5 us of latency per loop trip).
    if (threadIdx.x < n) sm.row_offset[threadIdx.x] = cache_offset(a, s, t0 + threadIdx.x, kvh);
    __syncthreads();
    if (vec) {
        const int chunks = D / kPerChunk; // per row
        for (int e = threadIdx.x; e < n * chunks; e += blockDim.x) {
            const int j = e / chunks, c = (e % chunks) * kPerChunk;
            const int64_t off = sm.row_offset[j] + c;
            cp_async_16(&sm.k[j][c], kc + off, true);
            cp_async_16(&sm.v[j][c], vc + off, true);
        }
        cp_async_commit();
        cp_async_wait<0>();
    } else {
        const int D8 = (D + 7) / 8 * 8;
        for (int e = threadIdx.x; e < n * D8; e += blockDim.x) {
            const int j = e / D8, d = e % D8;
            const int64_t off = sm.row_offset[j] + d;
            sm.k[j][d] = d < D ? kc[off] : from_float<T>(0.0f);
            sm.v[j][d] = d < D ? vc[off] : from_float<T>(0.0f);
        }
    }
    __syncthreads();
}

// Staged key row . staged query over dims [d0, d0 + 8).
template <typename T>
__device__ __forceinline__ float dot8_staged(const T* k_row, const float* q_row, int d0) {
    float kv[8];
    smem8(k_row, d0, kv);
    const float4 qa = *reinterpret_cast<const float4*>(q_row + d0);
    const float4 qb = *reinterpret_cast<const float4*>(q_row + d0 + 4);
    return qa.x * kv[0] + qa.y * kv[1] + qa.z * kv[2] + qa.w * kv[3] + qb.x * kv[4] + qb.y * kv[5] +
           qb.z * kv[6] + qb.w * kv[7];
}

// Folds one tile into head g's state: lane j scores key j against the staged query, the warp
// updates the softmax (softmax_update), then accumulates P V with lanes over dims.
template <typename T>
__device__ void attend_tile(const DecodeSmem<T>& sm, int g, int n, int D, HeadState& st) {
    const int lane = threadIdx.x & 31;
    float score = -FLT_MAX;
    if (lane < n) {
        // Four partial sums: one accumulator made the 256-long dot a chain of dependent FMAs.
        // Rows are zero-padded to a multiple of 8 only, so the loop stops there.
        const int D8 = (D + 7) / 8 * 8;
        float dot[4] = {};
        int d0 = 0;
        for (; d0 + 32 <= D8; d0 += 32) {
#pragma unroll
            for (int u = 0; u < 4; ++u) dot[u] += dot8_staged(sm.k[lane], sm.q[g], d0 + 8 * u);
        }
        for (; d0 < D8; d0 += 8) dot[0] += dot8_staged(sm.k[lane], sm.q[g], d0);
        score = (dot[0] + dot[1]) + (dot[2] + dot[3]);
    }
    const float p = softmax_update(score, n, st);
    const int d0 = lane * 8;
    const bool has_dims = d0 < D; // every lane shuffles; lanes past D add nothing
    for (int j = 0; j < n; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        if (!has_dims) continue;
        float vv[8];
        smem8(sm.v[j], d0, vv);
#pragma unroll
        for (int e = 0; e < 8; ++e) st.acc[e] += pj * vv[e];
    }
}

// Grid (row slot, head group, split): a head group is up to kMaxGroup query heads sharing one KV
// head, so each key is read from memory once for all of them. The block stages its split's keys
// tile by tile (cp.async, all rows at once: one memory latency per tile), and warp w keeps the
// softmax state of heads w, w + kWarps, ... over every key of the split, so no cross-warp merge
// is needed. Split-K: (max, sum, unnormalised acc) go to the partials; one split: the output.
// (Minimum 1 block per SM in the bounds: the f32 instance spills at the register cap of 2; the bf16
// one takes 94 registers either way, so 2 blocks of it still fit.)
template <typename T>
__global__ void __launch_bounds__(32 * kWarps, 1)
    attention_kernel(PagedArgs a, const T* q, int64_t q_s0, int64_t q_s1, const T* kc, const T* vc,
                     int group, int D, bool vec, float scale, T* out, int64_t o_s0, int64_t o_s1,
                     int max_rows, float* partials) {
    pdl_wait_and_release();
    __shared__ __align__(16) DecodeSmem<T> sm;
    DecodeWork w;
    if (!decode_work(a, group, max_rows, w)) return;
    // Read after stage_tile's barrier.
    stage_queries(q, w.r * q_s0, q_s1, w.h0, w.G, D, scale, sm.q);
    const KeyRange keys = split_keys(w);
    if (keys.empty()) return; // a split the context does not reach (the combine skips it)
    const int warp = threadIdx.x >> 5;
    HeadState st[kMaxGroup / kWarps];
    for (int64_t t0 = keys.begin; t0 < keys.end; t0 += kTileKeys<T>) {
        const int n = int(min(int64_t(kTileKeys<T>), keys.end - t0));
        stage_tile(a, w.s, t0, n, w.kvh, kc, vc, D, vec, sm); // ends with a barrier (q staged too)
#pragma unroll
        for (int m = 0; m < kMaxGroup / kWarps; ++m)
            if (warp + kWarps * m < w.G) attend_tile(sm, warp + kWarps * m, n, D, st[m]);
        __syncthreads(); // the tile is reused
    }
#pragma unroll
    for (int m = 0; m < kMaxGroup / kWarps; ++m)
        if (warp + kWarps * m < w.G)
            store_head(a, st[m], w.h0 + warp + kWarps * m, w.r, D, partials, out, o_s0, o_s1);
}

// Merges the split-K partials of one (row, head): out = sum_s e^{m_s - M} acc_s / sum_s e^{m_s - M}
// l_s. Thread k reads split k's (m, l), so the weights come from two block reductions instead of a
// serial pass over the splits; then thread d sums dim d over the splits, kCombineLoads loads in
// flight at a time (coalesced rows; one load at a time made the merge ~13 us at 64 splits).
template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    combine_splits(PagedArgs a, const float* partials, int splits, int D, T* out, int64_t o_s0,
                   int64_t o_s1, int max_rows) {
    pdl_wait_and_release();
    const int s = blockIdx.x / max_rows, i = blockIdx.x % max_rows, h = blockIdx.y;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1]) return;
    const float* base = partials + (int64_t(blockIdx.x) * gridDim.y + h) * splits * (D + 2);
    const int used = splits_in_use(int64_t(a.pos_begin[s]) + i, splits); // the rest wrote nothing
    const int k = threadIdx.x;
    const float l_k = k < used ? base[k * (D + 2) + 1] : 0.0f;
    const float m_k = l_k > 0.0f ? base[k * (D + 2)] : -FLT_MAX; // empty splits weigh nothing
    const float m = block_max(m_k);
    const float w_k = l_k > 0.0f ? __expf(m_k - m) : 0.0f;
    const float l = block_sum(l_k * w_k);
    __shared__ float weight[kMaxSplits];
    if (k < used) weight[k] = w_k / l;
    __syncthreads();
    const int d = threadIdx.x;
    if (d >= D) return;
    const float* col = base + 2 + d; // dim d of split 0's accumulator
    float v = 0.0f;
    int j = 0;
    for (; j + kCombineLoads <= used; j += kCombineLoads) {
        float x[kCombineLoads];
#pragma unroll
        for (int u = 0; u < kCombineLoads; ++u) x[u] = col[(j + u) * (D + 2)];
#pragma unroll
        for (int u = 0; u < kCombineLoads; ++u) v += x[u] * weight[j + u];
    }
    for (; j < used; ++j) v += col[j * (D + 2)] * weight[j];
    out[(r0 + i) * o_s0 + h * o_s1 + d] = from_float<T>(v);
}

// Splits of the key range per (row, head group): enough blocks to cover the SMs twice when few
// rows run (decode), one block per (row, head group) otherwise. The count depends on the row and
// head counts only, not on the context, so a graph captured at one context length replays the same
// arithmetic at another (splits with no keys exit at once).
int choose_splits(const ExecContext& ctx, int64_t row_groups, int max_splits) {
    const int64_t target = int64_t(kBlocksPerSm) * sm_count(ctx);
    if (row_groups >= target) return 1;
    return int(std::min<int64_t>((target + row_groups - 1) / row_groups, max_splits));
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

// A quantized plane's PagedArgs: cache_offset gives the row (block * bs + offset) * nKV + kv head
// of both planes, codes at row * D and scales at row * G (kv_cache.h: both contiguous).
PagedArgs paged_row_args(const SeqBatch& b, const KvPlane& plane, int num_heads = 0) {
    PagedArgs a = paged_args(b, plane.data, num_heads);
    a.cache_s0 = plane.size(1) * plane.size(2);
    a.cache_s1 = plane.size(2);
    a.cache_s2 = 1;
    return a;
}

void cache_encode(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                  const SeqBatch& batch, const KvPlane& k_cache, const KvPlane& v_cache) {
    const unsigned grid = unsigned(batch.num_seqs * batch.max_rows_per_seq);
    kvq::dispatch_codec(k_cache, "kv_cache_write", [&](auto codec) {
        using Codec = decltype(codec);
        if (!kvq::shape_fits<Codec>(k.size(2)))
            fail(ErrorCategory::Unsupported, "kv_cache_write: CUDA encodes ",
                 kv_dtype_name(k_cache.dtype(), k.dtype), " rows of head dim <= ", kvq::kRowDims,
                 ", got ", k.size(2));
        dispatch_float(k.dtype, "kv_cache_write", [&](auto tag) {
            using E = decltype(tag);
            launch_pdl(ctx, cache_encode_kernel<E, Codec>, grid, 32 * kEncodeWarps, 0,
                       paged_row_args(batch, k_cache), k.ptr<E>(), v.ptr<E>(), k.stride[0],
                       k.stride[1], v.stride[0], v.stride[1], int(k.size(1)), int(k.size(2)),
                       kvq::coded_planes<Codec>(k_cache, v_cache), batch.max_rows_per_seq);
        });
    });
    check_launch("cache_encode_kernel");
}

} // namespace

void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const KvPlane& k_cache, const KvPlane& v_cache) {
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    if (k_cache.quantized()) return cache_encode(ctx, k, v, batch, k_cache, v_cache);
    const unsigned grid = unsigned(batch.num_seqs * batch.max_rows_per_seq);
    dispatch_float(k.dtype, "kv_cache_write", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, cache_write_kernel<E>, grid, 256, 0, paged_args(batch, k_cache.data),
                   k.ptr<E>(), v.ptr<E>(), k.stride[0], k.stride[1], v.stride[0], v.stride[1],
                   int(k.size(1)), int(k.size(2)), k_cache.data.ptr<E>(), v_cache.data.ptr<E>(),
                   batch.max_rows_per_seq);
    });
    check_launch("cache_write_kernel");
}

void paged_attention(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out) {
    const int D = int(q.size(2));
    require(D <= kMaxDim, "paged_attention: CUDA supports head dim <= ", kMaxDim, ", got ", D);
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    if (batch.max_rows_per_seq >= kFlashMinRows) {
        // attention_prefill.bf16 / .coded: cuDNN's fused attention where the table gives it these
        // rows and it takes the shape (quantized planes through bf16 staging), else the flash
        // kernel.
        const bool coded = k_cache.quantized();
        const RouteId id = coded ? RouteId::AttentionPrefillCoded : RouteId::AttentionPrefillBf16;
        if (active_route_table().route(id, batch.max_rows_per_seq) == kRouteCudnn &&
            (coded ? cudnn_prefill_coded(ctx, q, k_cache, v_cache, batch, scale, out)
                   : cudnn_prefill(ctx, q, k_cache, v_cache, batch, scale, out)))
            return;
        if (flash_prefill_supported(q, k_cache, v_cache, out))
            return flash_prefill(ctx, q, k_cache, v_cache, batch, scale, out);
    }
    const int64_t nH = q.size(1), nKV = k_cache.size(2);
    const int group = int(nH / nKV);
    const int64_t head_groups = nKV * ((group + kMaxGroup - 1) / kMaxGroup);
    const int64_t row_slots = int64_t(batch.num_seqs) * batch.max_rows_per_seq;
    const int splits = choose_splits(ctx, int64_t(batch.num_rows) * head_groups, kMaxSplits);
    const dim3 grid{unsigned(row_slots), unsigned(head_groups), unsigned(splits)};
    float* partials = splits > 1
                          ? static_cast<float*>(stream_workspace(
                                ctx, size_t(row_slots * nH * splits * (D + 2)) * sizeof(float)))
                          : nullptr;
    const TensorView &kc = k_cache.data, &vc = v_cache.data;
    // 16-byte cp.async of the K and V rows (queries are staged element by element, any stride).
    const bool vec = D % 8 == 0 && kc.stride[2] % 8 == 0 && vc.stride[2] % 8 == 0 &&
                     kc.stride[1] % 8 == 0 && vc.stride[1] % 8 == 0 && kc.stride[0] % 8 == 0 &&
                     vc.stride[0] % 8 == 0 && reinterpret_cast<uintptr_t>(kc.data) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(vc.data) % 16 == 0;
    if (k_cache.quantized())
        launch_attention_coded(ctx, grid, paged_row_args(batch, k_cache, int(nH)), q, k_cache,
                               v_cache, group, scale, out, batch.max_rows_per_seq, partials);
    dispatch_float(q.dtype, "paged_attention", [&](auto tag) {
        using E = decltype(tag);
        if (!k_cache.quantized()) {
            launch_pdl(ctx, attention_kernel<E>, grid, 32 * kWarps, 0,
                       paged_args(batch, kc, int(nH)), q.ptr<E>(), q.stride[0], q.stride[1],
                       kc.ptr<E>(), vc.ptr<E>(), group, D, vec, scale, out.ptr<E>(),
                       out.stride[0], out.stride[1], batch.max_rows_per_seq, partials);
            check_launch("attention_kernel");
        }
        if (splits > 1) {
            launch_pdl(ctx, combine_splits<E>, dim3(unsigned(row_slots), unsigned(q.size(1))),
                       kCombineThreads, 0, paged_args(batch, kc), partials, splits, D,
                       out.ptr<E>(), out.stride[0], out.stride[1], batch.max_rows_per_seq);
            check_launch("combine_splits");
        }
    });
}

} // namespace ninfer::ops::cuda
