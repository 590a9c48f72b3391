// cuDNN's fused attention as a prefill route of paged_attention (ops/attention.h), the route
// decision attention_prefill.bf16's kernel "cudnn" (ops/route_table.h).
//
// The graph (cudnn-frontend's SDPA node): Q and O ragged over the batch's rows ([T, nH, D] with
// per-sequence offsets), K and V read in place from the paged planes through a page table, a
// padding mask with seq_len_q = rows(s) and seq_len_kv = pos_begin(s) + rows(s), and a causal mask
// aligned bottom-right, so row i of sequence s sees keys [0, pos_begin(s) + i]: paged_attention's
// contract. Softmax and accumulation in f32; bf16 in and out.
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.9, or $NINFER_CUDNN_LIBRARY): a build with
// the headers (cmake/cudnn.cmake) runs everywhere, and takes the route only where the library is
// there, is 9.10.2 or newer (paged K/V with head dim 256, ragged Q, bottom-right causal masks) and
// builds a plan for the shape; otherwise the caller keeps its own kernel.
//
// Graphs are built per (sequences, rows, context) bucket, each rounded up to a power of two
// (padding sequences have no rows), and cached per stream with the stream's cuDNN handle; a
// shape whose plan fails is remembered and not tried again. Never taken while the stream is being
// captured (a captured graph keeps its own kernels).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::ops::cuda {

// Runs paged_attention's contract through cuDNN when it can: bf16 q, out and planes (not
// quantized: cudnn_prefill_coded below), head dim a multiple of 8 up to 256, 16-byte aligned rows,
// cuDNN loaded, the stream not capturing, and a plan for the shape. Returns false (nothing written)
// otherwise.
bool cudnn_prefill(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                   const KvPlane& v_cache, const SeqBatch& batch, float scale,
                   const TensorView& out);

// The same route over quantized planes (int8 or fp8 codes, ops/kv_codec.h), where the route
// table's attention_prefill.coded gives it the rows (attention_cudnn_coded.cu): the blocks the
// batch reads are decoded into bf16 staging planes, the values the coded flash kernel attends
// over, and cuDNN reads those. Returns false (nothing written) where cudnn_prefill would, where
// the codec's rows do not stage (head dim a multiple of 8 whose scale groups hold whole 8-dim
// pieces), or where the staging would pass 1 GiB or cannot be allocated: the caller's flash
// kernel serves those.
bool cudnn_prefill_coded(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                         const KvPlane& v_cache, const SeqBatch& batch, float scale,
                         const TensorView& out);

// The smallest power of two times `floor` that is >= n: the buckets the graphs are cached by
// (sequences, rows, context) and the staging planes are sized to.
inline int64_t pow2_at_least(int64_t n, int64_t floor) {
    int64_t p = floor;
    while (p < n) p *= 2;
    return p;
}

// Whether cuDNN's library loaded and is new enough (loads it on the first call).
bool cudnn_available();
// One line for `ninfer info` and errors: the version loaded and from where, or why not.
std::string cudnn_status();

// How many paged_attention calls cuDNN has served in this process (tests check the route ran).
uint64_t cudnn_prefill_runs();

// Test hook (a sabotage arm): when set, every sequence's seq_len_kv is one key short, so the
// route's output must differ from the reference. Off by default.
void set_cudnn_prefill_sabotage(bool drop_last_key);

// The per-call metadata the graph reads, in the stream's workspace (attention_cudnn_meta.cu).
struct CudnnSdpaMeta {
    int32_t* seq_q;      // [Sb]: rows(s); 0 for the padding sequences s >= S
    int32_t* seq_kv;     // [Sb]: pos_begin(s) + rows(s) (- 1 under sabotage); 1 for padding
    int32_t* q_offset;   // [Sb + 1]: row_begin(s) * q_row_stride (padding: the end)
    int32_t* o_offset;   // [Sb + 1]: row_begin(s) * o_row_stride
    int32_t* page_table; // [Sb, table_size]: block_table's first table_size ids (padding: 0)
    void* workspace;     // workspace_bytes for cuDNN, 256-byte aligned (null when 0)
};
CudnnSdpaMeta cudnn_sdpa_meta(const ExecContext& ctx, const SeqBatch& batch, int32_t padded_seqs,
                              int32_t table_size, int64_t q_row_stride, int64_t o_row_stride,
                              int32_t kv_delta, size_t workspace_bytes);

} // namespace ninfer::ops::cuda
