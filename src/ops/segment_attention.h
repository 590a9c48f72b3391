// segment_attention: bidirectional (non-causal) multi-head attention within segments (the
// vision tower: one image per segment). Rows [seg[i], seg[i+1]) attend only to each other:
//   out[r, h] = sum_{u in seg(r)} softmax_u(scale * q[r, h] . k[u, h]) v[u, h]
//   q, k, v: [T, nH, D] float, last dim contiguous, other strides free (views into one fused
//     qkv projection [T, 3, nH, D])
//   out: [T, nH, D], contiguous, q's dtype
//   host_segments: [S + 1] non-decreasing (an empty segment is allowed), host_segments[0] = 0,
//     host_segments[S] = T, in host memory
//   segments: the same values as an I32 [S + 1] view on the execution device (on the CPU it may
//     be the same memory)
// Numerics: scores and softmax in f32 (f64 in CPU reference mode); online softmax allowed. The
// CUDA tensor-core route (bf16, D in {16, 32, 64, 72, 80, 96, 128}, 16-byte aligned rows,
// scale > 0) computes Q K^T and P V on bf16 MMAs with f32 accumulation and rounds P to bf16
// (FlashAttention-2's numerics); other shapes and F32 take a CUDA-core kernel with the scores
// in f32. CUDA supports D <= 256. The CPU runs its (row, head) tasks on threads in both modes
// (each is independent, so the reference result does not depend on them).
// Workspace: none.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void segment_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                       const TensorView& v, const int32_t* host_segments,
                       const TensorView& segments, float scale, const TensorView& out);

} // namespace ninfer::ops
