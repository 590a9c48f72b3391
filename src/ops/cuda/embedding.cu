// Implements ops/embedding.h on CUDA: one block per output row, a row copy.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

template <typename T>
__global__ void gather_rows(const int32_t* ids, const T* table, int64_t table_stride, int64_t V,
                            int64_t H, T* out, int64_t out_stride) {
    pdl_wait_and_release();
    const int64_t t = blockIdx.x;
    const int32_t id = ids[t];
    if (id < 0 || id >= V) return; // validated on the host side of the engine
    const T* src = table + id * table_stride;
    T* dst = out + t * out_stride;
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) dst[i] = src[i];
}

// One block per output row; each thread owns columns h, h + blockDim, ...
template <typename T>
__global__ void bag_add_rows(const int32_t* idx, const float* w, int n, const T* table,
                             int64_t table_stride, int64_t V, int64_t H, T* out,
                             int64_t out_stride) {
    pdl_wait_and_release();
    const int64_t t = blockIdx.x;
    T* dst = out + t * out_stride;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
            const int32_t id = idx[t * n + j];
            if (id < 0 || id >= V) continue; // validated on the host side of the model
            sum = fmaf(w[t * n + j], to_float(table[id * table_stride + h]), sum);
        }
        dst[h] = from_float<T>(to_float(dst[h]) + to_float(from_float<T>(sum)));
    }
}

} // namespace

void embedding_bag_add(const ExecContext& ctx, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out) {
    const int64_t T = indices.size(0);
    if (T == 0) return;
    dispatch_float(table.dtype, "embedding_bag_add", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, bag_add_rows<E>, unsigned(T), 256, 0, indices.ptr<int32_t>(),
                   weights.ptr<float>(), int(indices.size(1)), table.ptr<E>(), table.stride[0],
                   table.size(0), table.size(1), out.ptr<E>(), out.stride[0]);
    });
    check_launch("bag_add_rows");
}

void embedding(const ExecContext& ctx, const TensorView& ids, const TensorView& table,
               const TensorView& out) {
    const int64_t T = ids.size(0);
    if (T == 0) return;
    dispatch_float(table.dtype, "embedding", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, gather_rows<E>, unsigned(T), 256, 0, ids.ptr<int32_t>(), table.ptr<E>(),
                   table.stride[0], table.size(0), table.size(1), out.ptr<E>(), out.stride[0]);
    });
    check_launch("gather_rows");
}

} // namespace ninfer::ops::cuda
