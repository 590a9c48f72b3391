// CUDA bodies of the vision tower's ops (host functions; no CUDA headers here), as cuda_ops.h
// for the others. Builds without CUDA link cuda_stub.cpp instead, whose functions raise
// Unsupported.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/bias_act.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

void layer_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                const TensorView& b, float eps, const TensorView& y);
void bias_act(const ExecContext& ctx, const TensorView& y, const TensorView& b, Activation act);
void rope_table(const ExecContext& ctx, const TensorView& x, const TensorView& cos,
                const TensorView& sin, int64_t rotary_dim);

// segment_attention (segment_attention.cu) takes the tensor-core route when
// segment_attention_flash_supported and scale > 0 (segment_attention_flash.cu, which requires
// both), else the CUDA-core kernel.
// Both routes are callable directly (the tests run each against the CPU reference).
void segment_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                       const TensorView& v, const int32_t* host_segments,
                       const TensorView& segments, float scale, const TensorView& out);
// bf16 q/k/v/out, D a multiple of 8 in [8, 128], 16-byte aligned rows and head offsets.
bool segment_attention_flash_supported(const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView& out);
void segment_attention_flash(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const int32_t* host_segments,
                             const TensorView& segments, float scale, const TensorView& out);
// Any D <= 256, F32 or BF16, any strides with a contiguous last dim.
void segment_attention_general(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                               const TensorView& v, const int32_t* host_segments,
                               const TensorView& segments, float scale, const TensorView& out);

} // namespace ninfer::ops::cuda
