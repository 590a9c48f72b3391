// CPU bodies of the vision tower's ops (ops/layer_norm.h, bias_act.h, rope_table.h,
// segment_attention.h), as cpu_ops.h for the others: Reference runs the contract's loops with
// FP64 accumulation, Fast runs f32 over OpenMP threads. The dispatchers validate arguments first.
#pragma once

#include <cstdint>

#include "ops/bias_act.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cpu {

void layer_norm(CpuMode mode, const TensorView& x, const TensorView& w, const TensorView& b,
                float eps, const TensorView& y);
void bias_act(CpuMode mode, const TensorView& y, const TensorView& b, Activation act);
void rope_table(CpuMode mode, const TensorView& x, const TensorView& cos, const TensorView& sin,
                int64_t rotary_dim);
// segments: the host array of num_segments + 1 boundaries.
void segment_attention(CpuMode mode, const TensorView& q, const TensorView& k, const TensorView& v,
                       const int32_t* segments, int64_t num_segments, float scale,
                       const TensorView& out);

} // namespace ninfer::ops::cpu
