// Elementwise ops over row views: [R, N] or [A, B, N] (read as A * B rows of N), each with a
// contiguous last dim; other strides are free and may differ between arguments.
//   add:         out = a + b
//   sigmoid_mul: out = x * sigmoid(gate)          (the attention output gate)
//   silu_mul:    out[r, i] = silu(gu[r, i]) * gu[r, N + i] for gu [R, 2N]   (SwiGLU activation;
//                the first half of each row is the gate, the second half the up projection)
// Outputs may alias an input exactly. Numerics: f32 (f64 in CPU reference mode), rounded once.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void add(const ExecContext& ctx, const TensorView& a, const TensorView& b, const TensorView& out);
void sigmoid_mul(const ExecContext& ctx, const TensorView& x, const TensorView& gate,
                 const TensorView& out);
void silu_mul(const ExecContext& ctx, const TensorView& gate_up, const TensorView& out);

} // namespace ninfer::ops
