// CUDA bodies of the DFlash drafters' ops (ops/span_attention.h, ops/dflash.h; host functions, no
// CUDA headers here), as cuda_ops.h for the others. Builds without CUDA link dflash_stub.cpp
// instead, whose functions raise Unsupported.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/span_attention.h"

namespace ninfer::ops::cuda {

// span_attention.cu: a block per (row, KV head, up to 8 query heads of its group), D <= 256.
void span_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out);
// dflash.cu: a thread per (row, channel).
void grouped_dynamic_conv(const ExecContext& ctx, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size, const int32_t* host_segments,
                          const TensorView& segments, const TensorView& out);
// dflash.cu: a block per sequence walking its K positions in order. u may be empty when
// temperature <= 0.
void dflash_select(const ExecContext& ctx, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q);

} // namespace ninfer::ops::cuda
