// embedding: out[t, :] = table[ids[t], :]   (plain gather, no scaling)
//   ids: [T] I32, each in [0, V)      table: [V, H] float      out: [T, H] float, rows contiguous
// Numerics: exact (a copy, converted to out's dtype).
// Errors: an id outside [0, V) is InvalidArgument (the CPU backend checks every id).
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void embedding(const ExecContext& ctx, const TensorView& ids, const TensorView& table,
               const TensorView& out);

// embedding_bag_add: out[t, :] += round(sum_j weights[t, j] * table[indices[t, j], :])
//   (a weighted gather of n taps per row, added to out: the vision tower's interpolated learned
//   position embedding, HF's (pos_embed(indices) * weights).sum(1) added to the patches)
//   indices: [T, n] I32, each in [0, V)     weights: [T, n] F32     table: [V, H] float
//   out: [T, H] float, rows contiguous
// Numerics: the sum in f32 over the taps in order (f64 in CPU reference mode), rounded to out's
// dtype, then added to out and rounded again (HF: the f32 sum is cast, then added).
// Errors: an index outside [0, V) is InvalidArgument (the CPU backend checks every index).
void embedding_bag_add(const ExecContext& ctx, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out);

} // namespace ninfer::ops
