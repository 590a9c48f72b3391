// Gated GQA attention over a paged KV cache (MODEL_QWEN3_5.md §2.4).
//
// kv_cache_write: stores each row's k and v at its position in its sequence's blocks:
//   position p -> block block_table[s, p / bs], offset p % bs.
//   k, v: [T, nKV, D] float, last dim contiguous    k_cache, v_cache: KvPlane (ops/kv_cache.h),
//   [NB, bs, nKV, D]: the activation dtype (a copy), or a quantized codec's codes and scales
//   (each (row, kv head) is encoded by its codec, ops/kv_codec.h).
//
// paged_attention: for a row at position p of sequence s and head h (kv head h / (nH / nKV)):
//   out[r, h] = sum_{tau <= p} softmax_tau(scale * q[r, h] . K[s, tau, kvh]) V[s, tau, kvh]
//   reading K/V for tau in [0, p] through the block table (causal; the rows of this call must
//   already be written). q: [T, nH, D] float, last dim contiguous   out: [T, nH, D] contiguous.
//   K and V are the planes' values: the stored elements, or the codec's decode(code, scale).
//   Effects on unwritten rows: the CUDA routes read whole key tiles, so the rows of a sequence's
//   blocks past its context must hold finite values (masked, they are still multiplied by a
//   zero probability, and 0 x NaN is NaN); runtime::KvPool zero-fills its planes for that.
// Numerics: scores and softmax in f32 (f64 in CPU reference mode), online-softmax allowed. The
// CUDA tensor-core prefill routes (the flash kernel; cuDNN's fused attention:
// ops/cuda/attention_cudnn.h) round the probabilities to bf16 for the P V product, and both
// round quantized K and V values to bf16 before their MMAs (the flash kernel in its shared-memory
// tiles, cuDNN's route in bf16 staging planes: the same values).
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::ops {

void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const KvPlane& k_cache, const KvPlane& v_cache);

void paged_attention(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out);

} // namespace ninfer::ops
