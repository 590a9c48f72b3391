// Implements ops/conv1d.h on CUDA: one thread per (sequence, channel, chunk of 64 rows) walks its
// rows in order with the K-1 history values in registers (a long prefill spreads over rows as
// well as channels: one thread per channel walking 8192 rows took 6.3 ms on the H200).
// Assumes K <= 9 (checked by the dispatcher).
#include <algorithm>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxHistory = 8;
constexpr int kThreads = 128;     // consecutive channels: coalesced row reads
constexpr int kRowsPerChunk = 64; // rows one thread walks; its K-1 history rows are re-read

// Grid (channel block, row chunk, sequence): thread (c, chunk) walks rows [r0, r1) of its
// sequence in order with the K-1 previous inputs in registers, taken from x for rows inside this
// call and from conv_state for earlier positions. Only chunk 0's thread touches conv_state: it
// reads the old state before anything else and writes the new one (the sequence's last K-1
// inputs: x's last rows, or old state entries when the call has fewer than K-1 rows), so the
// chunks need no ordering among themselves.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    conv_chunks(const T* x, int64_t x_stride, const T* w, int K, int64_t C,
                const int32_t* row_begin, const int32_t* slots, const int32_t* snapshot_rows,
                T* state, T* y, int64_t y_stride) {
    pdl_wait_and_release();
    const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    const int s = blockIdx.z;
    if (c >= C) return;
    const int64_t b = row_begin[s], e = row_begin[s + 1];
    const int64_t r0 = b + int64_t(blockIdx.y) * kRowsPerChunk;
    if (r0 >= e) return;
    const int64_t r1 = min(e, r0 + kRowsPerChunk);
    const int S = K - 1;
    T* st = state + (int64_t(slots[s]) * C + c) * S;
    // Per-row snapshots (seq_batch.h): at most kMaxSnapshotRows rows, so chunk 0 holds them all.
    const int32_t snap = snapshot_rows ? snapshot_rows[s] : -1;
    // hist[j]: the input at row r0 - S + j (st[S - (b - q)] for a row q before this call).
    float hist[kMaxHistory], old[kMaxHistory];
#pragma unroll
    for (int j = 0; j < kMaxHistory; ++j) {
        const int64_t q = r0 - S + j;
        old[j] = (blockIdx.y == 0 && j < S) ? to_float(st[j]) : 0.0f;
        hist[j] = j >= S ? 0.0f : q >= b ? to_float(x[q * x_stride + c]) : old[j];
    }
    float taps[kMaxHistory + 1];
#pragma unroll
    for (int j = 0; j <= kMaxHistory; ++j) taps[j] = j < K ? to_float(w[c * K + j]) : 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
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
        if (snap >= 0 && r + 1 < e) { // the state after row r: inputs r - S + 1 .. r
            T* out = state + ((int64_t(snap) + (r - b)) * C + c) * S;
#pragma unroll
            for (int j = 0; j < kMaxHistory; ++j)
                if (j < S) out[j] = from_float<T>(hist[j]);
        }
    }
    if (blockIdx.y != 0) return;
    // New state entry j: the input at row e - S + j, or old entry j + n before this call.
    const int64_t n = e - b;
#pragma unroll
    for (int j = 0; j < kMaxHistory; ++j) {
        if (j >= S) break;
        const int64_t q = e - S + j;
        float v = 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxHistory; ++i)
            if (i == j + n) v = old[i]; // n < S here; constant indices keep old in registers
        st[j] = q >= b ? x[q * x_stride + c] : from_float<T>(v);
    }
}

} // namespace

void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y) {
    const int64_t C = x.size(1);
    if (batch.num_seqs == 0 || x.size(0) == 0) return;
    const unsigned chunks = unsigned((batch.max_rows_per_seq + kRowsPerChunk - 1) / kRowsPerChunk);
    const dim3 grid(blocks_for(C, kThreads), std::max(chunks, 1u), unsigned(batch.num_seqs));
    dispatch_float(x.dtype, "causal_conv1d_silu", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, conv_chunks<E>, grid, kThreads, 0, x.ptr<E>(), x.stride[0], w.ptr<E>(),
                   int(w.size(1)), C, batch.row_begin.ptr<int32_t>(),
                   batch.state_slot.ptr<int32_t>(),
                   batch.has_snapshots() ? batch.snapshot_row.ptr<int32_t>() : nullptr,
                   conv_state.ptr<E>(), y.ptr<E>(), y.stride[0]);
    });
    check_launch("conv_chunks");
}

} // namespace ninfer::ops::cuda
