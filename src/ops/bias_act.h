// bias_act: the epilogue of a biased linear, in place:  y[t, n] = act(y[t, n] + b[n])
//   act: None (bias only); GeluTanh, gelu_pytorch_tanh:
//        0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)));
//        GeluErf, torch.nn.GELU(): 0.5 x (1 + erf(x / sqrt(2))) (the vision merger's)
//   y: [T, N] float, rows contiguous (any row stride)   b: [N] contiguous, y's dtype or F32
// Numerics: computed in f32 (f64 in CPU reference mode) from the stored y, rounded once.
// Workspace: none.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

enum class Activation { None, GeluTanh, GeluErf };

void bias_act(const ExecContext& ctx, const TensorView& y, const TensorView& b, Activation act);

} // namespace ninfer::ops
