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

} // namespace ninfer::ops
