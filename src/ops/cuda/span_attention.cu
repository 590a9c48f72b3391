// Implements ops/span_attention.h on CUDA: a block per (row, KV head, up to 8 query heads of that
// KV head's group), one warp per query head, each warp keeping its head's online softmax in f32
// while the block stages the span's keys and values in shared memory 32 (f32: 16) at a time.
// Staging once per KV head serves every query head of the group (the point of grouped-query
// attention: nH / nKV fewer K/V reads). Lane = key when scoring, lane = 8 dims when accumulating
// P V (as segment_attention_rows). Keys are found through the block table per tile.
#include <algorithm>
#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/dflash_ops.h"
#include "ops/cuda/mma.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxDim = 256; // 32 lanes x 8 dims
constexpr int kWarps = 8;    // query heads per block at most
template <typename T> constexpr int kTileKeys = sizeof(T) == 2 ? 32 : 16; // < 48 KB static smem

template <typename T> struct SpanSmem {
    static constexpr int kPitch = kMaxDim + 16 / int(sizeof(T)); // +16 bytes: no bank conflicts
    T k[kTileKeys<T>][kPitch];
    T v[kTileKeys<T>][kPitch];
    float q[kWarps][kMaxDim];
    int64_t key_row[kTileKeys<T>]; // element offset of each tile key's [D] row in the caches
};

struct SpanArgs {
    const void* q;
    int64_t q_s0, q_s1; // elements
    const void* k_cache;
    const void* v_cache;
    const int32_t* table_row;   // [R]
    const int32_t* key_begin;   // [R]
    const int32_t* key_end;     // [R]
    const int32_t* block_table; // [S, table_stride]
    int table_stride, bs, nKV, group, D;
    bool vec; // D % 8 == 0 and 16-byte aligned caches: whole rows by cp.async
    float scale;
    void* out; // [R, nH, D] contiguous
};

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

struct HeadState {
    float max = -FLT_MAX, sum = 0.0f, acc[8] = {};
};

// Keys [t0, t0 + n) of the span into sm.k / sm.v (rows zero-padded to a multiple of 8 dims).
template <typename T>
__device__ void stage_tile(const SpanArgs& a, SpanSmem<T>& sm, const int32_t* table, int kvh,
                           int64_t t0, int n) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const int64_t tau = t0 + j, block = table[tau / a.bs];
        sm.key_row[j] = ((block * a.bs + tau % a.bs) * a.nKV + kvh) * a.D;
    }
    __syncthreads();
    const T* kc = static_cast<const T*>(a.k_cache);
    const T* vc = static_cast<const T*>(a.v_cache);
    if (a.vec) {
        constexpr int kPerChunk = 16 / int(sizeof(T));
        const int chunks = a.D / kPerChunk;
        for (int e = threadIdx.x; e < n * chunks; e += blockDim.x) {
            const int j = e / chunks, c = (e % chunks) * kPerChunk;
            cp_async_16(&sm.k[j][c], kc + sm.key_row[j] + c, true);
            cp_async_16(&sm.v[j][c], vc + sm.key_row[j] + c, true);
        }
        cp_async_commit();
        cp_async_wait<0>();
    } else {
        const int D8 = (a.D + 7) / 8 * 8;
        for (int e = threadIdx.x; e < n * D8; e += blockDim.x) {
            const int j = e / D8, d = e % D8;
            sm.k[j][d] = d < a.D ? kc[sm.key_row[j] + d] : from_float<T>(0.0f);
            sm.v[j][d] = d < a.D ? vc[sm.key_row[j] + d] : from_float<T>(0.0f);
        }
    }
    __syncthreads();
}

// One warp's query head over the staged tile of n keys: scores (lane = key), then the online
// softmax update and P V (lane = dims 8 lane .. 8 lane + 7).
template <typename T>
__device__ void attend_tile(const SpanSmem<T>& sm, const float* q, int D, int n, int lane,
                            HeadState& st) {
    const int D8 = (D + 7) / 8 * 8;
    float score = -FLT_MAX;
    if (lane < n) {
        float dot[4] = {};
        int d0 = 0;
        for (; d0 + 32 <= D8; d0 += 32) {
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                float kv[8];
                smem8(sm.k[lane], d0 + 8 * u, kv);
#pragma unroll
                for (int e = 0; e < 8; ++e) dot[u] += q[d0 + 8 * u + e] * kv[e];
            }
        }
        for (; d0 < D8; d0 += 8) {
            float kv[8];
            smem8(sm.k[lane], d0, kv);
#pragma unroll
            for (int e = 0; e < 8; ++e) dot[0] += q[d0 + e] * kv[e];
        }
        score = (dot[0] + dot[1]) + (dot[2] + dot[3]);
    }
    const float new_max = fmaxf(st.max, warp_max(score));
    const float p = lane < n ? __expf(score - new_max) : 0.0f;
    const float correction = __expf(st.max - new_max);
    st.sum = st.sum * correction + warp_sum(p);
    st.max = new_max;
#pragma unroll
    for (int e = 0; e < 8; ++e) st.acc[e] *= correction;
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

// grid (R, nKV, ceil(group / warps)), block 32 x warps: warp w serves query head
// kvh * group + blockIdx.z * warps + w of row blockIdx.x.
template <typename T>
__global__ void __launch_bounds__(32 * kWarps) span_attention_rows(SpanArgs a) {
    pdl_wait_and_release();
    __shared__ __align__(16) SpanSmem<T> sm;
    const int64_t r = blockIdx.x;
    const int kvh = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int in_group = blockIdx.z * (blockDim.x >> 5) + warp;
    const bool active = in_group < a.group; // the last z slice may hold fewer heads
    const int64_t h = int64_t(kvh) * a.group + in_group, nH = int64_t(a.nKV) * a.group;
    const T* qr = static_cast<const T*>(a.q) + r * a.q_s0 + h * a.q_s1;
    for (int d = lane; d < kMaxDim; d += 32)
        sm.q[warp][d] = active && d < a.D ? to_float(qr[d]) * a.scale : 0.0f;
    const int64_t begin = a.key_begin[r], end = a.key_end[r];
    const int32_t* table = a.block_table + int64_t(a.table_row[r]) * a.table_stride;
    HeadState st;
    for (int64_t t0 = begin; t0 < end; t0 += kTileKeys<T>) {
        const int n = int(min(int64_t(kTileKeys<T>), end - t0));
        stage_tile(a, sm, table, kvh, t0, n); // also orders the q writes above before reads
        if (active) attend_tile(sm, sm.q[warp], a.D, n, lane, st);
        __syncthreads(); // the tile is reused
    }
    if (!active) return;
    T* o = static_cast<T*>(a.out) + (r * nH + h) * a.D;
    const int d0 = lane * 8;
    for (int e = 0; e < 8; ++e)
        if (d0 + e < a.D) o[d0 + e] = from_float<T>(st.acc[e] / st.sum);
}

} // namespace

void span_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out) {
    const int64_t R = q.size(0), nH = q.size(1), D = q.size(2), nKV = k_cache.size(2);
    require(D <= kMaxDim, "span_attention: CUDA supports head dim <= ", kMaxDim, ", got ", D);
    require(nKV <= 65535, "span_attention: CUDA supports at most 65535 KV heads, got ", nKV);
    const int64_t group = nH / nKV;
    const int warps = int(std::min<int64_t>(group, kWarps));
    const dim3 grid(unsigned(R), unsigned(nKV), unsigned((group + warps - 1) / warps));
    SpanArgs a{q.data, q.stride[0], q.stride[1], k_cache.data, v_cache.data,
               spans.table_row.ptr<int32_t>(), spans.key_begin.ptr<int32_t>(),
               spans.key_end.ptr<int32_t>(), spans.block_table.ptr<int32_t>(),
               spans.block_table_stride, spans.block_size, int(nKV), int(group), int(D),
               // Rows sit D elements apart in the contiguous caches: 16-byte chunks need D % 8 == 0
               // (bf16; f32 keeps the same rule, as segment_attention_rows).
               D % 8 == 0 && aligned16(k_cache.data) && aligned16(v_cache.data), scale, out.data};
    dispatch_float(q.dtype, "span_attention", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, span_attention_rows<E>, grid, 32 * warps, 0, a);
    });
    check_launch("span_attention_rows");
}

} // namespace ninfer::ops::cuda
