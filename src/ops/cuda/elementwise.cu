// Implements ops/elementwise.h and add_sigmoid_scaled (ops/moe.h) on CUDA: a grid of column
// tiles by rows (tiles_grid).
#include <algorithm>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

enum class Binary { Add, SigmoidMul };

// Rows are independent and short next to a GPU (one decode row of the 27B's MLP is 17,408
// values), so a row is spread over blocks: blockIdx.x takes a tile of kThreads x kPerThread
// columns, blockIdx.y (striding past the grid's 65,535 limit) a row. Each thread issues its
// kPerThread loads before any store (a store may alias an input, so the compiler would not
// move a load past it): one memory round trip a tile instead of one per element (one block per
// row took 33 us for that 27B row).
constexpr int kThreads = 256;
constexpr int kPerThread = 4;
constexpr int64_t kTile = kThreads * kPerThread;
constexpr int64_t kMaxGridRows = 65535;

dim3 tiles_grid(int64_t R, int64_t N) {
    return dim3(unsigned((N + kTile - 1) / kTile), unsigned(std::min(R, kMaxGridRows)));
}

// The binary ops' arithmetic: x + y, or x * sigmoid(y).
template <Binary kOp> __device__ __forceinline__ float apply_binary(float x, float y) {
    return kOp == Binary::Add ? x + y : x / (1.0f + __expf(-y));
}

template <typename T, Binary kOp>
__global__ void binary_rows(RowView a, RowView b, RowView out, int64_t R, int64_t N) {
    pdl_wait_and_release();
    const int64_t c0 = int64_t(blockIdx.x) * kTile + threadIdx.x;
    for (int64_t r = blockIdx.y; r < R; r += gridDim.y) {
        const T* ar = a.row<T>(r);
        const T* br = b.row<T>(r);
        float x[kPerThread], y[kPerThread];
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            x[j] = i < N ? to_float(ar[i]) : 0.0f;
            y[j] = i < N ? to_float(br[i]) : 0.0f;
        }
        T* o = out.row<T>(r);
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            if (i < N) o[i] = from_float<T>(apply_binary<kOp>(x[j], y[j]));
        }
    }
}

// binary_rows for rows of at most kShortRow elements: a warp per row, lane l takes elements
// l + 32 m, all loaded before any store. Why: the tile layout gives a 256-wide row (the
// attention output gate, [T, heads, 256]) one element a thread and a dependent row loop, which
// ran at ~0.4 TB/s (1.2 ms a 35B attention layer at 64k rows on an H100).
constexpr int kShortRow = 256;
constexpr int kShortIters = kShortRow / 32;
constexpr int kWarpsPerBlock = kThreads / 32;

template <typename T, Binary kOp>
__global__ void binary_short_rows(RowView a, RowView b, RowView out, int64_t R, int N) {
    pdl_wait_and_release();
    const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (r >= R) return;
    const int lane = threadIdx.x & 31;
    const T* ar = a.row<T>(r);
    const T* br = b.row<T>(r);
    float x[kShortIters], y[kShortIters];
#pragma unroll
    for (int m = 0; m < kShortIters; ++m) {
        const int i = lane + 32 * m;
        x[m] = i < N ? to_float(ar[i]) : 0.0f;
        y[m] = i < N ? to_float(br[i]) : 0.0f;
    }
    T* o = out.row<T>(r);
#pragma unroll
    for (int m = 0; m < kShortIters; ++m) {
        const int i = lane + 32 * m;
        if (i < N) o[i] = from_float<T>(apply_binary<kOp>(x[m], y[m]));
    }
}

template <typename T> __global__ void silu_mul_rows(RowView gu, RowView out, int64_t R, int64_t N) {
    pdl_wait_and_release();
    const int64_t c0 = int64_t(blockIdx.x) * kTile + threadIdx.x;
    for (int64_t r = blockIdx.y; r < R; r += gridDim.y) {
        const T* g = gu.row<T>(r);
        float gate[kPerThread], up[kPerThread];
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            gate[j] = i < N ? to_float(g[i]) : 0.0f;
            up[j] = i < N ? to_float(g[N + i]) : 0.0f;
        }
        T* o = out.row<T>(r);
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            if (i < N) o[i] = from_float<T>(gate[j] / (1.0f + __expf(-gate[j])) * up[j]);
        }
    }
}

template <typename T>
__global__ void add_sigmoid_scaled_rows(RowView gate, RowView shared, RowView y, int64_t R,
                                        int64_t H) {
    pdl_wait_and_release();
    const int64_t c0 = int64_t(blockIdx.x) * kTile + threadIdx.x;
    for (int64_t r = blockIdx.y; r < R; r += gridDim.y) {
        const float scale = 1.0f / (1.0f + __expf(-gate.row<float>(r)[0]));
        const T* sr = shared.row<T>(r);
        T* yr = y.row<T>(r);
        float sv[kPerThread], yv[kPerThread];
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            sv[j] = i < H ? to_float(sr[i]) : 0.0f;
            yv[j] = i < H ? to_float(yr[i]) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int64_t i = c0 + j * kThreads;
            if (i < H) yr[i] = from_float<T>(yv[j] + scale * sv[j]);
        }
    }
}

template <Binary kOp>
void launch_binary(const ExecContext& ctx, const TensorView& a, const TensorView& b,
                   const TensorView& out, const char* name) {
    const int64_t R = rows_of(out), N = width_of(out);
    if (R == 0) return;
    dispatch_float(out.dtype, name, [&](auto tag) {
        using E = decltype(tag);
        if (N <= kShortRow)
            launch_pdl(ctx, binary_short_rows<E, kOp>,
                       dim3(unsigned((R + kWarpsPerBlock - 1) / kWarpsPerBlock)), kThreads, 0,
                       row_view(a), row_view(b), row_view(out), R, int(N));
        else
            launch_pdl(ctx, binary_rows<E, kOp>, tiles_grid(R, N), kThreads, 0, row_view(a),
                       row_view(b), row_view(out), R, N);
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
        launch_pdl(ctx, silu_mul_rows<E>, tiles_grid(R, N), kThreads, 0, row_view(gate_up),
                   row_view(out), R, N);
    });
    check_launch("silu_mul_rows");
}

void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y) {
    const int64_t R = rows_of(y), H = width_of(y);
    if (R == 0) return;
    dispatch_float(y.dtype, "add_sigmoid_scaled", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, add_sigmoid_scaled_rows<E>, tiles_grid(R, H), kThreads, 0,
                   row_view(gate_logit), row_view(shared), row_view(y), R, H);
    });
    check_launch("add_sigmoid_scaled_rows");
}

} // namespace ninfer::ops::cuda
