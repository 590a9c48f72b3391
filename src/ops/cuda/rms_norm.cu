// Implements ops/rms_norm.h and ops/gated_rms_norm.h on CUDA: one block per row, the sum of
// squares reduced in f32, the row read twice (second read from L1/L2).
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

template <typename T>
__global__ void rms_norm_rows(RowView x, const T* w, float eps, float weight_offset, int64_t H,
                              RowView y) {
    pdl_wait_and_release();
    const T* xr = x.row<T>(blockIdx.x);
    T* yr = y.row<T>(blockIdx.x);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
        const float v = to_float(xr[i]);
        sum += v * v;
    }
    const float scale = rsqrtf(block_sum(sum) / float(H) + eps);
    if (weight_offset == 0.0f) { // plain weight: HF rounds the normalised value first
        for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
            yr[i] = from_float<T>(to_float(w[i]) * to_float(from_float<T>(to_float(xr[i]) * scale)));
        return;
    }
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
        yr[i] = from_float<T>(to_float(xr[i]) * scale * (weight_offset + to_float(w[i])));
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
    dispatch_float(x.dtype, "rms_norm", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, rms_norm_rows<E>, unsigned(R), threads_for(H), 0, row_view(x), w.ptr<E>(),
                   eps, weight_offset, H, row_view(y));
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
