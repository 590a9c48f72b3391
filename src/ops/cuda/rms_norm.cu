// Implements ops/rms_norm.h and ops/gated_rms_norm.h on CUDA: one block per row, the sum of
// squares reduced in f32; rms_norm keeps rows up to 16 x 512 wide in registers.
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

} // namespace

void rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset) {
    const int64_t R = rows_of(x), H = width_of(x);
    if (R == 0) return;
    const int threads = threads_for(H);
    const int64_t per_thread = (H + threads - 1) / threads;
    dispatch_float(x.dtype, "rms_norm", [&](auto tag) {
        using E = decltype(tag);
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
        launch_pdl(ctx, gated_rms_norm_rows<E>, unsigned(R), threads_for(D), 0, row_view(x),
                   row_view(z), w.ptr<E>(), eps, D, row_view(y));
    });
    check_launch("gated_rms_norm_rows");
}

} // namespace ninfer::ops::cuda
