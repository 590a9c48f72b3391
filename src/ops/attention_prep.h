// attention_prep: an attention layer's work between in_proj and paged attention (MODEL_QWEN3_5.md
// §2.4), over any ragged batch. It is, by definition, the composition
//   rms_norm(q_in, q_norm, eps) -> q          rms_norm(k_in, k_norm, eps) -> k    (ops/rms_norm.h)
//   rope(q, positions, rotary_dim, theta)     rope(k, positions, rotary_dim, theta) (ops/rope.h)
//   kv_cache_write(k, v_in, batch, k_cache, v_cache) (ops/attention.h) q_in: [T, nH, D]   k_in,
//   v_in: [T, nKV, D]: float, last dim contiguous, other strides free (the
//     model passes the query halves, k and v of in_proj's output as head views)
//   q_norm, k_norm: [D], contiguous      positions: [T] I32, the rotary position of each row
//   rotary_dim: even, in [2, D]          theta > 0
//   batch: the rows' sequences; row r of sequence s goes to cache position pos_begin[s] + (r -
//     row_begin[s]) through its block table (kv_cache_write's paged layout)
//   q: [T, nH, D], last dim contiguous: the output (normalised and rotated queries); may be q_in
//     itself (in place)
//   k: [T, nKV, D], last dim contiguous: scratch, left unspecified (the fused CUDA route does not
//     write it); may be k_in itself
//   k_cache, v_cache: KvPlane (ops/kv_cache.h) [NB, bs, nKV, D], bs = batch.block_size: the rows'
//     positions are written (stored as kv_cache_write stores them: a copy, or the plane's
//     codec), every other entry is left as it was
//   Every float tensor (the caches too, unless quantized) has the activation dtype.
// Numerics: the composition's: the norm in f32 (f64 in CPU reference mode) with the normalised
// value rounded once to the activation dtype; the rotation reads that rounded value, computes in
// f32 with the angle f32(positions[t]) * inv_freq rounded to f32, and rounds once. The CPU body
// (both modes) runs the five ops. CUDA runs one kernel (a warp per row and head) when D % 8 == 0,
// D <= 256, rotary_dim % 16 == 0 and the rows, heads, weights and caches start 16-byte aligned,
// for any batch; otherwise it runs the five ops.
// Workspace: none beyond k.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::ops {

void attention_prep(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                    const TensorView& v_in, const TensorView& q_norm, const TensorView& k_norm,
                    float eps, const TensorView& positions, int64_t rotary_dim, double theta,
                    const SeqBatch& batch, const TensorView& q, const TensorView& k,
                    const KvPlane& k_cache, const KvPlane& v_cache);

} // namespace ninfer::ops
