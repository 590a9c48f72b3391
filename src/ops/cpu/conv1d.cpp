// Implements ops/conv1d.h on the CPU: a window of K inputs per channel, taken from the rows of
// this call or, before the first row, from the sequence's conv state.
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc>
void conv_sequence(const TensorView& x, const TensorView& w, const float* state_in,
                   float* state_out, float* snapshots, int64_t snapshot_stride, int64_t row0,
                   int64_t rows, const TensorView& y, int64_t c_begin, int64_t c_end) {
    const int64_t K = w.size(1), S = K - 1;
    const float* wp = w.ptr<float>();
    // xin(i) for i in [-S, rows): history from the state for i < 0, rows of x otherwise.
    auto input = [&](int64_t i, int64_t c) -> float {
        return i < 0 ? state_in[c * S + (S + i)] : row_f32(x, row0 + i)[c];
    };
    for (int64_t c = c_begin; c < c_end; ++c) {
        for (int64_t i = 0; i < rows; ++i) {
            Acc sum = 0;
            for (int64_t j = 0; j < K; ++j) sum += Acc(wp[c * K + j]) * Acc(input(i - S + j, c));
            row_f32(y, row0 + i)[c] = float(silu(sum));
        }
        // Per-row snapshots: the state after row i holds inputs i - S + 1 .. i (before the
        // sequence's own state is overwritten below).
        if (snapshots)
            for (int64_t i = 0; i + 1 < rows; ++i)
                for (int64_t j = 0; j < S; ++j)
                    snapshots[i * snapshot_stride + c * S + j] = input(i - S + 1 + j, c);
        // The new state holds the last S inputs (pre-conv), oldest first.
        float last[8];
        for (int64_t j = 0; j < S; ++j) last[j] = input(rows - S + j, c);
        for (int64_t j = 0; j < S; ++j) state_out[c * S + j] = last[j];
    }
}

} // namespace

void causal_conv1d_silu(CpuMode mode, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y) {
    const int64_t C = x.size(1);
    // Channels are independent: split each sequence's channels into blocks for the threads.
    constexpr int64_t kChannelBlock = 64;
    const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
    for (int32_t s = 0; s < batch.num_seqs; ++s) {
        const int64_t rows = batch.rows(s);
        if (rows == 0) continue;
        float* state = conv_state.ptr<float>() + batch.host_state_slot[s] * conv_state.stride[0];
        const int32_t snap_row = batch.has_snapshots() ? batch.host_snapshot_row[s] : -1;
        float* snaps =
            snap_row >= 0 ? conv_state.ptr<float>() + snap_row * conv_state.stride[0] : nullptr;
        const int64_t snap_stride = conv_state.stride[0];
        for_each_row(
            mode, blocks,
            [&](int64_t b) {
                int64_t c0 = b * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
                if (mode == CpuMode::Reference)
                    conv_sequence<double>(x, w, state, state, snaps, snap_stride, batch.host_row_begin[s], rows, y, c0,
                                          c1);
                else
                    conv_sequence<float>(x, w, state, state, snaps, snap_stride, batch.host_row_begin[s], rows, y, c0,
                                         c1);
            },
            rows * kChannelBlock * w.size(1));
    }
}

} // namespace ninfer::ops::cpu
