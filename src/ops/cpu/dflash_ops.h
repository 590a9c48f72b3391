// CPU bodies of the DFlash drafters' ops (ops/span_attention.h, ops/dflash.h), as cpu_ops.h for
// the others: Reference runs the contract's loops with FP64 accumulation, Fast runs f32 over
// OpenMP threads. The dispatchers validate arguments first (host arrays included).
#pragma once

#include <cstdint>

#include "ops/exec_context.h"
#include "ops/span_attention.h"

namespace ninfer::ops::cpu {

void span_attention(CpuMode mode, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out);
// segments: the host array of num_segments + 1 boundaries.
void grouped_dynamic_conv(CpuMode mode, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size, const int32_t* segments,
                          int64_t num_segments, const TensorView& out);
// u may be empty when temperature <= 0.
void dflash_select(CpuMode mode, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q);

} // namespace ninfer::ops::cpu
