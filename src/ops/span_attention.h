// span_attention: multi-head attention of query rows over explicit key spans of a paged KV cache
// (the DFlash drafters' non-causal, windowed block attention; model/dflash.h). Row r reads the
// keys of positions [key_begin[r], key_end[r]) through block-table row table_row[r]:
//   K[r, tau] = k_cache[block_table[table_row[r], tau / bs], tau % bs]   (likewise V)
//   out[r, h] = sum_{tau} softmax_tau(scale * q[r, h] . K[r, tau, kvh]) V[r, tau, kvh],
//   kvh = h / (nH / nKV)   (grouped-query attention)
//   q: [R, nH, D] float, last dim contiguous, other strides free   out: [R, nH, D] contiguous,
//     q's dtype
//   k_cache, v_cache: [NB, bs, nKV, D] contiguous, q's dtype (activation planes only: the
//     drafters' caches are never quantized)
//   spans: per row table_row, key_begin, key_end (host arrays and the same values as I32 device
//     views); 0 <= key_begin < key_end <= block_table_stride * bs (an empty span is an error);
//     the table entries a span touches must be blocks of the cache, the others are not read
//     (padding such as -1 is fine)
// Numerics: scores and softmax in f32 (f64 in CPU reference mode); online softmax allowed.
// Workspace: none.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

struct SpanBatch {
    int32_t num_rows = 0;
    const int32_t* host_table_row = nullptr; // [R]
    const int32_t* host_key_begin = nullptr; // [R]
    const int32_t* host_key_end = nullptr;   // [R]
    const int32_t* host_block_table = nullptr; // [S, block_table_stride]
    int32_t num_table_rows = 0;                // S
    int32_t block_table_stride = 0;
    int32_t block_size = 0;
    TensorView table_row, key_begin, key_end; // [R] I32 on the execution device
    TensorView block_table;                   // [S, block_table_stride] I32
};

void span_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out);

} // namespace ninfer::ops
