// Implements ops/segment_attention.h on CUDA. Bf16 shapes that segment_attention_flash_supported
// accepts, with a positive scale, take the tensor-core kernel (segment_attention_flash.cu); the
// rest take
// segment_attention_rows here (any D <= 256, F32 or BF16, any head strides): a block per
// (8 query rows of one segment, head), each of its 8 warps keeping the online softmax of one row
// while the block stages the segment's keys in shared memory 32 (f32: 16) at a time (lane = key
// when scoring, lane = 8 dims when accumulating P V, as paged_attention's CUDA-core kernel).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxDim = 256; // 32 lanes x 8 dims
constexpr int kWarps = 8;    // query rows per block
constexpr unsigned kMaxGridZ = 65535;
template <typename T> constexpr int kTileKeys = sizeof(T) == 2 ? 32 : 16; // < 48 KB static smem

template <typename T> struct RowsSmem {
    static constexpr int kPitch = kMaxDim + 16 / int(sizeof(T)); // +16 bytes: no bank conflicts
    T k[kTileKeys<T>][kPitch];
    T v[kTileKeys<T>][kPitch];
    float q[kWarps][kMaxDim];
};

struct HeadView {
    const char* data;
    int64_t s0, s1; // elements
};

template <typename T> __device__ __forceinline__ const T* head_row(HeadView t, int64_t r, int h) {
    return reinterpret_cast<const T*>(t.data) + r * t.s0 + h * t.s1;
}

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

struct RowState {
    float max = -FLT_MAX, sum = 0.0f, acc[8] = {};
};

template <typename T>
__global__ void __launch_bounds__(32 * kWarps)
    segment_attention_rows(HeadView q, HeadView k, HeadView v, const int32_t* segments,
                           int num_segments, int D, bool vec, float scale, T* out, int64_t o_s0,
                           int64_t o_s1) {
    pdl_wait_and_release();
    __shared__ __align__(16) RowsSmem<T> sm;
    const int h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int D8 = (D + 7) / 8 * 8;
    for (int s = blockIdx.z; s < num_segments; s += gridDim.z) {
        const int64_t seg0 = segments[s], seg1 = segments[s + 1];
        const int64_t i0 = int64_t(blockIdx.x) * kWarps;
        if (seg0 + i0 >= seg1) continue; // uniform over the block
        const int64_t r = seg0 + i0 + warp;
        const bool active = r < seg1;
        __syncthreads(); // the previous segment's last tile and queries are no longer read
        for (int d = lane; d < kMaxDim; d += 32)
            sm.q[warp][d] = active && d < D ? to_float(head_row<T>(q, r, h)[d]) * scale : 0.0f;
        RowState st;
        for (int64_t t0 = seg0; t0 < seg1; t0 += kTileKeys<T>) {
            const int n = int(min(int64_t(kTileKeys<T>), seg1 - t0));
            if (vec) { // D % 8 == 0, 16-byte aligned rows
                constexpr int kPerChunk = 16 / int(sizeof(T));
                const int chunks = D / kPerChunk;
                for (int e = threadIdx.x; e < n * chunks; e += blockDim.x) {
                    const int j = e / chunks, c = (e % chunks) * kPerChunk;
                    cp_async_16(&sm.k[j][c], head_row<T>(k, t0 + j, h) + c, true);
                    cp_async_16(&sm.v[j][c], head_row<T>(v, t0 + j, h) + c, true);
                }
                cp_async_commit();
                cp_async_wait<0>();
            } else {
                for (int e = threadIdx.x; e < n * D8; e += blockDim.x) {
                    const int j = e / D8, d = e % D8;
                    sm.k[j][d] = d < D ? head_row<T>(k, t0 + j, h)[d] : from_float<T>(0.0f);
                    sm.v[j][d] = d < D ? head_row<T>(v, t0 + j, h)[d] : from_float<T>(0.0f);
                }
            }
            __syncthreads();
            if (active) {
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
                            for (int e = 0; e < 8; ++e)
                                dot[u] += sm.q[warp][d0 + 8 * u + e] * kv[e];
                        }
                    }
                    for (; d0 < D8; d0 += 8) {
                        float kv[8];
                        smem8(sm.k[lane], d0, kv);
#pragma unroll
                        for (int e = 0; e < 8; ++e) dot[0] += sm.q[warp][d0 + e] * kv[e];
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
            __syncthreads(); // the tile is reused
        }
        if (active) {
            const int d0 = lane * 8;
            T* o = out + r * o_s0 + h * o_s1;
            for (int e = 0; e < 8; ++e)
                if (d0 + e < D) o[d0 + e] = from_float<T>(st.acc[e] / st.sum);
        }
    }
}

HeadView head_view(const TensorView& t) {
    return {static_cast<const char*>(t.data), t.stride[0], t.stride[1]};
}

bool aligned16(const TensorView& t) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride[0] % 8 == 0 &&
           t.stride[1] % 8 == 0;
}

} // namespace

void segment_attention_general(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                               const TensorView& v, const int32_t* host_segments,
                               const TensorView& segments, float scale, const TensorView& out) {
    const int D = int(q.size(2));
    require(D <= kMaxDim, "segment_attention: CUDA supports head dim <= ", kMaxDim, ", got ", D);
    const int64_t S = segments.size(0) - 1, nH = q.size(1);
    if (q.size(0) == 0 || nH == 0 || S <= 0) return;
    int64_t longest = 0;
    for (int64_t s = 0; s < S; ++s)
        longest = std::max<int64_t>(longest, host_segments[s + 1] - host_segments[s]);
    const dim3 grid(unsigned((longest + kWarps - 1) / kWarps), unsigned(nH),
                    unsigned(std::min<int64_t>(S, kMaxGridZ)));
    // 16-byte cp.async of whole K/V rows (f32 and bf16 chunks both need D % 8 == 0 here, so
    // that rows need no zero padding).
    const bool vec = D % 8 == 0 && aligned16(k) && aligned16(v);
    dispatch_float(q.dtype, "segment_attention", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, segment_attention_rows<E>, grid, 32 * kWarps, 0, head_view(q), head_view(k),
                   head_view(v), segments.ptr<int32_t>(), int(S), D, vec, scale, out.ptr<E>(),
                   out.stride[0], out.stride[1]);
    });
    check_launch("segment_attention_rows");
}

void segment_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                       const TensorView& v, const int32_t* host_segments,
                       const TensorView& segments, float scale, const TensorView& out) {
    const int64_t D = q.size(2);
    require(D <= kMaxDim, "segment_attention: CUDA supports head dim <= ", kMaxDim, ", got ", D);
    if (scale > 0.0f && std::isfinite(scale) && segment_attention_flash_supported(q, k, v, out))
        return segment_attention_flash(ctx, q, k, v, host_segments, segments, scale, out);
    segment_attention_general(ctx, q, k, v, host_segments, segments, scale, out);
}

} // namespace ninfer::ops::cuda
