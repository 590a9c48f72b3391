// Implements ops/conv1d.h on CUDA: one thread per (sequence, channel) walks the sequence's rows
// in order with the K-1 history values in registers; chosen for any T (a row loop per thread).
// Assumes K <= 9 (checked by the dispatcher).
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxHistory = 8;

template <typename T>
__global__ void conv_sequences(const T* x, int64_t x_stride, const T* w, int K, int64_t C,
                               const int32_t* row_begin, const int32_t* slots, T* state, T* y,
                               int64_t y_stride) {
    pdl_wait_and_release();
    const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    const int s = blockIdx.y;
    if (c >= C) return;
    const int S = K - 1;
    T* st = state + (int64_t(slots[s]) * C + c) * S;
    float hist[kMaxHistory];
    float taps[kMaxHistory + 1];
#pragma unroll
    for (int j = 0; j < kMaxHistory; ++j) hist[j] = j < S ? to_float(st[j]) : 0.0f;
#pragma unroll
    for (int j = 0; j <= kMaxHistory; ++j) taps[j] = j < K ? to_float(w[c * K + j]) : 0.0f;
    for (int64_t r = row_begin[s]; r < row_begin[s + 1]; ++r) {
        const float cur = to_float(x[r * x_stride + c]);
        float sum = taps[S] * cur;
#pragma unroll
        for (int j = 0; j < kMaxHistory; ++j)
            if (j < S) sum += taps[j] * hist[j];
        y[r * y_stride + c] = from_float<T>(sum / (1.0f + __expf(-sum)));
#pragma unroll
        for (int j = 0; j + 1 < kMaxHistory; ++j)
            if (j + 1 < S) hist[j] = hist[j + 1];
#pragma unroll
        for (int j = 0; j < kMaxHistory; ++j)
            if (j == S - 1) hist[j] = cur; // constant indices keep hist in registers
    }
#pragma unroll
    for (int j = 0; j < kMaxHistory; ++j)
        if (j < S) st[j] = from_float<T>(hist[j]);
}

} // namespace

void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y) {
    const int64_t C = x.size(1);
    if (batch.num_seqs == 0 || x.size(0) == 0) return;
    const dim3 grid(blocks_for(C, 128), unsigned(batch.num_seqs));
    dispatch_float(x.dtype, "causal_conv1d_silu", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, conv_sequences<E>, grid, 128, 0, x.ptr<E>(), x.stride[0], w.ptr<E>(),
                   int(w.size(1)), C, batch.row_begin.ptr<int32_t>(),
                   batch.state_slot.ptr<int32_t>(), conv_state.ptr<E>(), y.ptr<E>(), y.stride[0]);
    });
    check_launch("conv_sequences");
}

} // namespace ninfer::ops::cuda
