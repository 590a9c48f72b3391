// Implements ops/elementwise.h and add_sigmoid_scaled (ops/moe.h) on CUDA: a grid over rows,
// threads over the row.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

enum class Binary { Add, SigmoidMul };

template <typename T, Binary kOp>
__global__ void binary_rows(RowView a, RowView b, RowView out, int64_t N) {
    pdl_wait_and_release();
    const T* ar = a.row<T>(blockIdx.x);
    const T* br = b.row<T>(blockIdx.x);
    T* o = out.row<T>(blockIdx.x);
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        const float x = to_float(ar[i]), y = to_float(br[i]);
        o[i] = from_float<T>(kOp == Binary::Add ? x + y : x / (1.0f + __expf(-y)));
    }
}

template <typename T> __global__ void silu_mul_rows(RowView gu, RowView out, int64_t N) {
    pdl_wait_and_release();
    const T* g = gu.row<T>(blockIdx.x);
    T* o = out.row<T>(blockIdx.x);
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        const float gate = to_float(g[i]);
        o[i] = from_float<T>(gate / (1.0f + __expf(-gate)) * to_float(g[N + i]));
    }
}

template <typename T>
__global__ void add_sigmoid_scaled_rows(RowView gate, RowView shared, RowView y, int64_t H) {
    pdl_wait_and_release();
    const float s = gate.row<float>(blockIdx.x)[0];
    const float scale = 1.0f / (1.0f + __expf(-s));
    const T* sr = shared.row<T>(blockIdx.x);
    T* yr = y.row<T>(blockIdx.x);
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
        yr[i] = from_float<T>(to_float(yr[i]) + scale * to_float(sr[i]));
}

template <Binary kOp>
void launch_binary(const ExecContext& ctx, const TensorView& a, const TensorView& b,
                   const TensorView& out, const char* name) {
    const int64_t R = rows_of(out), N = width_of(out);
    if (R == 0) return;
    dispatch_float(out.dtype, name, [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, binary_rows<E, kOp>, unsigned(R), 256, 0, row_view(a), row_view(b),
                   row_view(out), N);
    });
    check_launch(name);
}

} // namespace

void add(const ExecContext& ctx, const TensorView& a, const TensorView& b, const TensorView& out) {
    launch_binary<Binary::Add>(ctx, a, b, out, "add");
}

void sigmoid_mul(const ExecContext& ctx, const TensorView& x, const TensorView& gate,
                 const TensorView& out) {
    launch_binary<Binary::SigmoidMul>(ctx, x, gate, out, "sigmoid_mul");
}

void silu_mul(const ExecContext& ctx, const TensorView& gate_up, const TensorView& out) {
    const int64_t R = rows_of(out), N = width_of(out);
    if (R == 0) return;
    dispatch_float(out.dtype, "silu_mul", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, silu_mul_rows<E>, unsigned(R), 256, 0, row_view(gate_up), row_view(out), N);
    });
    check_launch("silu_mul_rows");
}

void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y) {
    const int64_t R = rows_of(y), H = width_of(y);
    if (R == 0) return;
    dispatch_float(y.dtype, "add_sigmoid_scaled", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, add_sigmoid_scaled_rows<E>, unsigned(R), 256, 0, row_view(gate_logit),
                   row_view(shared), row_view(y), H);
    });
    check_launch("add_sigmoid_scaled_rows");
}

} // namespace ninfer::ops::cuda
