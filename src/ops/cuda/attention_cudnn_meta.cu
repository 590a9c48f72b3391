// The per-call metadata of the cuDNN prefill route (attention_cudnn.h): sequence lengths, ragged
// offsets and a page table padded to the graph's bucket, written on the device from the batch's
// device arrays (no host round trip).
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/cuda_common.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kAlign = 256; // cuDNN's and the int tables' alignment within the workspace

size_t aligned(size_t bytes) {
    return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Block s: sequence s's lengths and offsets, and its page-table row (block 0 past its table or
// for the padding sequences, so every id the graph may read is a real block).
__global__ void __launch_bounds__(kThreads)
    sdpa_meta_kernel(const int32_t* row_begin, const int32_t* pos_begin, const int32_t* blocks,
                     int32_t table_stride, int32_t seqs, int32_t table_size, int64_t q_s0,
                     int64_t o_s0, int32_t kv_delta, CudnnSdpaMeta m) {
    pdl_wait_and_release();
    const int32_t s = blockIdx.x;
    const bool real = s < seqs;
    if (threadIdx.x == 0) {
        const int32_t r0 = row_begin[real ? s : seqs];
        const int32_t rows = real ? row_begin[s + 1] - r0 : 0;
        m.seq_q[s] = rows;
        m.seq_kv[s] = real ? pos_begin[s] + rows + kv_delta : 1;
        m.q_offset[s] = int32_t(r0 * q_s0);
        m.o_offset[s] = int32_t(r0 * o_s0);
        if (s == int32_t(gridDim.x) - 1) {
            m.q_offset[s + 1] = int32_t(int64_t(row_begin[seqs]) * q_s0);
            m.o_offset[s + 1] = int32_t(int64_t(row_begin[seqs]) * o_s0);
        }
    }
    const int32_t used = real ? min(table_size, table_stride) : 0;
    for (int32_t j = threadIdx.x; j < table_size; j += kThreads)
        m.page_table[int64_t(s) * table_size + j] =
            j < used ? blocks[int64_t(s) * table_stride + j] : 0;
}

} // namespace

CudnnSdpaMeta cudnn_sdpa_meta(const ExecContext& ctx, const SeqBatch& batch, int32_t padded_seqs,
                              int32_t table_size, int64_t q_row_stride, int64_t o_row_stride,
                              int32_t kv_delta, size_t workspace_bytes) {
    const size_t seqs = size_t(padded_seqs);
    const size_t lengths = aligned(2 * seqs * sizeof(int32_t));
    const size_t offsets = aligned(2 * (seqs + 1) * sizeof(int32_t));
    const size_t table = aligned(seqs * size_t(table_size) * sizeof(int32_t));
    char* base = static_cast<char*>(
        stream_workspace(ctx, lengths + offsets + table + aligned(workspace_bytes)));
    CudnnSdpaMeta m;
    m.seq_q = reinterpret_cast<int32_t*>(base);
    m.seq_kv = m.seq_q + seqs;
    m.q_offset = reinterpret_cast<int32_t*>(base + lengths);
    m.o_offset = m.q_offset + seqs + 1;
    m.page_table = reinterpret_cast<int32_t*>(base + lengths + offsets);
    m.workspace = workspace_bytes ? base + lengths + offsets + table : nullptr;
    launch_pdl(ctx, sdpa_meta_kernel, dim3(unsigned(padded_seqs)), dim3(kThreads), 0,
               batch.row_begin.ptr<int32_t>(), batch.pos_begin.ptr<int32_t>(),
               batch.block_table.ptr<int32_t>(), batch.block_table_stride, batch.num_seqs,
               table_size, q_row_stride, o_row_stride, kv_delta, m);
    check_launch("sdpa_meta_kernel");
    return m;
}

} // namespace ninfer::ops::cuda
