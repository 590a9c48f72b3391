// The tensor-core prefill route of paged_attention (attention_flash.cu), chosen by attention.cu.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::ops::cuda {

// Rows of a sequence from which a batch takes the tensor-core route: a 64-row tile then does
// at least a quarter of useful work (below, decode and short verify chunks keep the CUDA-core
// split-K kernel, which reads each key once per row instead of once per 64 rows).
constexpr int kFlashMinRows = 16;

// bf16 q and out, head dim 64/128/256, 16-byte aligned rows; planes in bf16 or quantized (the
// codes and scales of a tile are staged, then turned into a bf16 tile: bf16_rn(decode)).
bool flash_prefill_supported(const TensorView& q, const KvPlane& k_cache, const KvPlane& v_cache,
                             const TensorView& out);

// paged_attention's contract (ops/attention.h) for batches that pass flash_prefill_supported.
void flash_prefill(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                   const KvPlane& v_cache, const SeqBatch& batch, float scale,
                   const TensorView& out);

} // namespace ninfer::ops::cuda
