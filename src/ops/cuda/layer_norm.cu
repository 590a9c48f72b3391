// Implements ops/layer_norm.h on CUDA: one warp per row, three passes over the row (sum, sum of
// centred squares, affine map; the second and third read from L1), with 16-byte loads and
// stores when every row is aligned and K is a multiple of them.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kRowsPerBlock = 8; // one warp each

// N consecutive elements at p (16-byte aligned) as floats.
template <int N> __device__ __forceinline__ void load_floats(const float* p, float (&v)[N]) {
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
        const float4 a = reinterpret_cast<const float4*>(p)[j];
        v[4 * j] = a.x, v[4 * j + 1] = a.y, v[4 * j + 2] = a.z, v[4 * j + 3] = a.w;
    }
}
template <int N>
__device__ __forceinline__ void load_floats(const __nv_bfloat16* p, float (&v)[N]) {
    static_assert(N % 8 == 0);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        float w[8];
        bf16x8_to_float(reinterpret_cast<const uint4*>(p)[j], w);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[8 * j + e] = w[e];
    }
}
__device__ __forceinline__ void store_floats(float* p, const float (&v)[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store_floats(__nv_bfloat16* p, const float (&v)[8]) {
    uint4 raw;
    uint32_t* words = reinterpret_cast<uint32_t*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
        words[j] = *reinterpret_cast<const uint32_t*>(&pair);
    }
    *reinterpret_cast<uint4*>(p) = raw;
}

template <typename T, typename W, bool kVec>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    layer_norm_rows(RowView x, const W* w, const W* b, float eps, int64_t K, int64_t R, RowView y) {
    pdl_wait_and_release();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
    if (r >= R) return;
    const T* xr = x.row<T>(r);
    T* yr = y.row<T>(r);
    constexpr int V = 16 / int(sizeof(T)); // elements per 16-byte chunk
    float sum = 0.0f;
    if constexpr (kVec) {
        for (int64_t i = int64_t(lane) * V; i < K; i += 32 * V) {
            float v[V];
            load_floats(xr + i, v);
#pragma unroll
            for (int e = 0; e < V; ++e) sum += v[e];
        }
    } else {
        for (int64_t i = lane; i < K; i += 32) sum += to_float(xr[i]);
    }
    const float mean = warp_sum(sum) / float(K);
    float sq = 0.0f;
    if constexpr (kVec) {
        for (int64_t i = int64_t(lane) * V; i < K; i += 32 * V) {
            float v[V];
            load_floats(xr + i, v);
#pragma unroll
            for (int e = 0; e < V; ++e) sq += (v[e] - mean) * (v[e] - mean);
        }
    } else {
        for (int64_t i = lane; i < K; i += 32) {
            const float d = to_float(xr[i]) - mean;
            sq += d * d;
        }
    }
    const float inv = rsqrtf(warp_sum(sq) / float(K) + eps);
    if constexpr (kVec) {
        for (int64_t i = int64_t(lane) * V; i < K; i += 32 * V) {
            float v[V], wv[V], bv[V];
            load_floats(xr + i, v);
            load_floats(w + i, wv);
            load_floats(b + i, bv);
#pragma unroll
            for (int e = 0; e < V; ++e) v[e] = (v[e] - mean) * inv * wv[e] + bv[e];
            store_floats(yr + i, v);
        }
    } else {
        for (int64_t i = lane; i < K; i += 32)
            yr[i] = from_float<T>((to_float(xr[i]) - mean) * inv * to_float(w[i]) + to_float(b[i]));
    }
}

bool aligned_rows(const TensorView& t, int64_t elems) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride[0] % elems == 0 &&
           (t.ndim < 3 || t.stride[1] % elems == 0);
}

template <typename T, typename W>
void launch(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& b,
            float eps, const TensorView& y) {
    const int64_t R = rows_of(x), K = width_of(x);
    constexpr int64_t V = 16 / int64_t(sizeof(T));
    const bool vec = K % V == 0 && aligned_rows(x, V) && aligned_rows(y, V) &&
                     reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
    const unsigned grid = blocks_for(R, kRowsPerBlock);
    if (vec)
        launch_pdl(ctx, layer_norm_rows<T, W, true>, grid, 32 * kRowsPerBlock, 0, row_view(x),
                   w.ptr<W>(), b.ptr<W>(), eps, K, R, row_view(y));
    else
        launch_pdl(ctx, layer_norm_rows<T, W, false>, grid, 32 * kRowsPerBlock, 0, row_view(x),
                   w.ptr<W>(), b.ptr<W>(), eps, K, R, row_view(y));
    check_launch("layer_norm_rows");
}

} // namespace

void layer_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                const TensorView& b, float eps, const TensorView& y) {
    if (rows_of(x) == 0) return;
    dispatch_float(x.dtype, "layer_norm", [&](auto tag) {
        using E = decltype(tag);
        if (w.dtype == DType::F32)
            launch<E, float>(ctx, x, w, b, eps, y);
        else
            launch<E, E>(ctx, x, w, b, eps, y);
    });
}

} // namespace ninfer::ops::cuda
