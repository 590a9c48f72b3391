// Implements ops/rms_norm.h and ops/gated_rms_norm.h on CUDA: the sum of squares reduced in f32,
// one block per row; rms_norm keeps rows up to 16 x 512 wide in registers. Rows of a head's width
// (<= 256: the GDN heads' 128, the attention heads' 256) take one warp each instead, in the
// block kernel's summation order (same bits): a 8,192-token prefill has 262,144 GDN head rows,
// and a block apiece, each with two barriers for 128 elements, ran at ~0.6 TB/s.
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

// V > 0: each thread keeps its elements x[t + j * blockDim.x], j < V, in registers from the
// sum to the store (H <= V * blockDim.x), so the row is read once and every load is issued
// before the first store (a decode row: one memory round trip instead of H / blockDim.x). V = 0:
// any H, the row read again from L1/L2 for the store. Both sum in the same order (each thread
// its elements in index order, then block_sum), so they give the same bits.
template <typename T, int V>
__global__ void rms_norm_rows(RowView x, const T* w, float eps, float weight_offset, int64_t H,
                              RowView y) {
    pdl_wait_and_release();
    const T* xr = x.row<T>(blockIdx.x);
    T* yr = y.row<T>(blockIdx.x);
    float sum = 0.0f;
    float v[V > 0 ? V : 1];
    if constexpr (V > 0) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
            v[j] = i < H ? to_float(xr[i]) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < V; ++j) sum += v[j] * v[j];
    } else {
        for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
            const float e = to_float(xr[i]);
            sum += e * e;
        }
    }
    const float scale = rsqrtf(block_sum(sum) / float(H) + eps);
    // HF: a plain weight multiplies the normalised value rounded first; an offset weight
    // (1 + w) multiplies the f32 product.
    const auto out = [&](float e, int64_t i) {
        return weight_offset == 0.0f
                   ? from_float<T>(to_float(w[i]) * to_float(from_float<T>(e * scale)))
                   : from_float<T>(e * scale * (weight_offset + to_float(w[i])));
    };
    if constexpr (V > 0) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
            if (i < H) yr[i] = out(v[j], i);
        }
    } else {
        for (int64_t i = threadIdx.x; i < H; i += blockDim.x) yr[i] = out(to_float(xr[i]), i);
    }
}

template <typename T>
__global__ void gated_rms_norm_rows(RowView x, RowView z, const T* w, float eps, int64_t D,
                                    RowView y) {
    pdl_wait_and_release();
    const T* xr = x.row<T>(blockIdx.x);
    const T* zr = z.row<T>(blockIdx.x);
    T* yr = y.row<T>(blockIdx.x);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        const float v = to_float(xr[i]);
        sum += v * v;
    }
    const float scale = rsqrtf(block_sum(sum) / float(D) + eps);
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        const float g = to_float(zr[i]);
        // HF rounds the normalised value to the activation dtype before the weight.
        const float n = to_float(from_float<T>(to_float(xr[i]) * scale));
        yr[i] = from_float<T>(to_float(w[i]) * n * (g / (1.0f + __expf(-g))));
    }
}

int threads_for(int64_t width) {
    return width >= 1024 ? 512 : width >= 256 ? 256 : 128;
}

// The warp route: W = threads_for(D) / 32 partial sums and D <= 32 W (each block thread had at
// most one element), so lane l's v[j] is the block kernel's thread 32 j + l.
constexpr int kWarpRowsMaxWidth = 256;
constexpr int kRowsPerWarpBlock = 8; // warps (rows) per block
bool warp_route(int64_t D) {
    return D <= kWarpRowsMaxWidth && D <= threads_for(D);
}

// block_sum's result over the squares of v, where block thread 32 j + lane held v[j]: each
// warp's warp_sum, then warp_sum over lanes holding the W warp sums (zeros beyond), whose xor
// butterfly adds p[i] + p[i + offset] for offset = 16, 8, ..., 1 (offsets past W add zeros).
template <int W> __device__ __forceinline__ float sum_squares_in_block_order(const float (&v)[W]) {
    float p[W];
#pragma unroll
    for (int j = 0; j < W; ++j) p[j] = warp_sum(v[j] * v[j]);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
#pragma unroll
        for (int i = 0; i < offset; ++i)
            if (i + offset < W) p[i] += p[i + offset];
    return p[0];
}

// One warp per row (rows_of(x) = R), its lane holding elements 32 j + lane (j < W).
template <typename T, int W>
__global__ void rms_norm_warp_rows(RowView x, const T* w, float eps, float weight_offset,
                                   int64_t H, int64_t R, RowView y) {
    pdl_wait_and_release();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kRowsPerWarpBlock + (threadIdx.x >> 5);
    if (r >= R) return; // the whole warp
    const T* xr = x.row<T>(r);
    T* yr = y.row<T>(r);
    float v[W];
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = 32 * j + lane < H ? to_float(xr[32 * j + lane]) : 0.0f;
    const float scale = rsqrtf(sum_squares_in_block_order(v) / float(H) + eps);
#pragma unroll
    for (int j = 0; j < W; ++j) {
        const int64_t i = 32 * j + lane;
        if (i >= H) continue;
        yr[i] = weight_offset == 0.0f
                    ? from_float<T>(to_float(w[i]) * to_float(from_float<T>(v[j] * scale)))
                    : from_float<T>(v[j] * scale * (weight_offset + to_float(w[i])));
    }
}

template <typename T, int W>
__global__ void gated_rms_norm_warp_rows(RowView x, RowView z, const T* w, float eps, int64_t D,
                                         int64_t R, RowView y) {
    pdl_wait_and_release();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kRowsPerWarpBlock + (threadIdx.x >> 5);
    if (r >= R) return; // the whole warp
    const T* xr = x.row<T>(r);
    const T* zr = z.row<T>(r);
    T* yr = y.row<T>(r);
    float v[W], g[W];
#pragma unroll
    for (int j = 0; j < W; ++j) {
        const bool in = 32 * j + lane < D;
        v[j] = in ? to_float(xr[32 * j + lane]) : 0.0f;
        g[j] = in ? to_float(zr[32 * j + lane]) : 0.0f;
    }
    const float scale = rsqrtf(sum_squares_in_block_order(v) / float(D) + eps);
#pragma unroll
    for (int j = 0; j < W; ++j) {
        const int64_t i = 32 * j + lane;
        if (i >= D) continue;
        const float n = to_float(from_float<T>(v[j] * scale));
        yr[i] = from_float<T>(to_float(w[i]) * n * (g[j] / (1.0f + __expf(-g[j]))));
    }
}

// Launches kernel<W> for W = threads_for(D) / 32 (4 or 8 under warp_route).
template <typename Launch> void launch_warp_rows(int64_t D, Launch&& launch) {
    if (threads_for(D) == 128)
        launch(std::integral_constant<int, 4>{});
    else
        launch(std::integral_constant<int, 8>{});
}

} // namespace

void rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset) {
    const int64_t R = rows_of(x), H = width_of(x);
    if (R == 0) return;
    const int threads = threads_for(H);
    const int64_t per_thread = (H + threads - 1) / threads;
    dispatch_float(x.dtype, "rms_norm", [&](auto tag) {
        using E = decltype(tag);
        if (warp_route(H))
            return launch_warp_rows(H, [&](auto w_tag) {
                launch_pdl(ctx, rms_norm_warp_rows<E, decltype(w_tag)::value>,
                           unsigned((R + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock),
                           32 * kRowsPerWarpBlock, 0, row_view(x), w.ptr<E>(), eps, weight_offset,
                           H, R, row_view(y));
            });
        auto launch = [&](auto kernel) {
            launch_pdl(ctx, kernel, unsigned(R), threads, 0, row_view(x), w.ptr<E>(), eps,
                       weight_offset, H, row_view(y));
        };
        if (per_thread <= 4)
            launch(rms_norm_rows<E, 4>);
        else if (per_thread <= 8)
            launch(rms_norm_rows<E, 8>);
        else if (per_thread <= 16)
            launch(rms_norm_rows<E, 16>); // up to 8,192 wide (the 27B: 5,120)
        else
            launch(rms_norm_rows<E, 0>);
    });
    check_launch("rms_norm_rows");
}

void gated_rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& z,
                    const TensorView& w, float eps, const TensorView& y) {
    const int64_t R = rows_of(x), D = width_of(x);
    if (R == 0) return;
    dispatch_float(x.dtype, "gated_rms_norm", [&](auto tag) {
        using E = decltype(tag);
        if (warp_route(D))
            return launch_warp_rows(D, [&](auto w_tag) {
                launch_pdl(ctx, gated_rms_norm_warp_rows<E, decltype(w_tag)::value>,
                           unsigned((R + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock),
                           32 * kRowsPerWarpBlock, 0, row_view(x), row_view(z), w.ptr<E>(), eps,
                           D, R, row_view(y));
            });
        launch_pdl(ctx, gated_rms_norm_rows<E>, unsigned(R), threads_for(D), 0, row_view(x),
                   row_view(z), w.ptr<E>(), eps, D, row_view(y));
    });
    check_launch("gated_rms_norm_rows");
}

} // namespace ninfer::ops::cuda
