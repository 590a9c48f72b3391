// causal_conv1d_silu: causal depthwise conv over time, then SiLU, per sequence of a ragged batch.
//   For channel c and a row at position p of sequence s (K = kernel width):
//     y[r, c] = silu( sum_{j=0..K-1} w[c, j] * xin(p - (K-1) + j, c) )
//   where xin(q, c) = x[row of q, c] for positions inside this call, and for q < pos_begin[s]
//   comes from conv_state[slot, c, K-1 - (pos_begin[s] - q)] (the last K-1 pre-conv inputs of the
//   sequence; zeros at the start of a sequence). Tap j = K-1 multiplies the current token.
//   x: [T, C] float, last dim contiguous    w: [C, K] float (conv1d.weight viewed [C, K])
//   conv_state: [S_slots, C, K-1] float, read and updated in place to hold the last K-1 inputs;
//     with per-row snapshots (seq_batch.h) the history after each earlier row i also goes to
//     state row snapshot_row[s] + i
//   y: [T, C] float, rows contiguous; must not alias x
// Numerics: f32 accumulation (f64 in CPU reference mode). Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/seq_batch.h"

namespace ninfer::ops {

void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y);

} // namespace ninfer::ops
