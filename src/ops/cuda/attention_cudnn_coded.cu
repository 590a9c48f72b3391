// paged_attention's cuDNN prefill route over quantized planes (attention_cudnn.h): the KV blocks
// the batch reads are decoded into bf16 staging planes, and cuDNN's fused attention reads those
// through a page table into the staging planes.
//
// The staged values are bf16_rn(decode(code, scale)), 8 codes at a time through kvq::decode8:
// exactly the bf16 K and V tiles the coded flash kernel (attention_flash_coded.cu) builds in
// shared memory before its MMAs, so both routes attend over the same bf16 keys and values. Rows
// of a sequence's last block past its context are staged as zeros (the flash kernel zero-fills
// them too), so stale codes in the pool never reach the softmax.
//
// Layout: sequence s owns staging blocks [offset(s), offset(s) + n(s)), n(s) = its context in
// blocks, offset(s) = the blocks of the sequences before it; a prefix block shared by two
// sequences is staged once for each. The staging planes are [bucket, bs, nKV, D], bucket a power
// of two of at least 64 blocks (the cuDNN graphs are cached per plane shape, so the count of
// graphs stays logarithmic in the staged context).
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/kv_plane.cuh"
#include "ops/memory.h"

namespace ninfer::ops::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
// The staging planes' cap (both planes): 1 GiB is 512k tokens of the 35B's 2 x 256 kv-head dims
// (256k of the 27B's 4 x 256), more than a 65,536-row serving step with 256 running sequences
// reads; a batch past it keeps the coded flash kernel, as does one whose staging cannot be
// allocated.
constexpr int64_t kMaxStagingBytes = int64_t(1) << 30;
constexpr int64_t kMinStagingBlocks = 64;

// Where one staging block comes from: the pool block, and how many of its bs rows the sequence
// holds (the rest are staged as zeros).
struct StagedFrom {
    int32_t block, rows;
};

// Sequence s's context after this call: its cached positions and its rows.
__device__ __forceinline__ int32_t context_of(const int32_t* row_begin, const int32_t* pos_begin,
                                              int32_t s) {
    return pos_begin[s] + row_begin[s + 1] - row_begin[s];
}

// Block s: sequence s's staging offset (the blocks of the sequences before it, summed by the
// block), its row of the staging table (offset + j for its blocks, 0 past them: every id the
// graph may read is a staged block) and the source of each of its staging blocks.
__global__ void __launch_bounds__(kThreads)
    plan_staging(const int32_t* row_begin, const int32_t* pos_begin, const int32_t* table,
                 int32_t table_stride, int32_t bs, int32_t* staged_table, StagedFrom* from) {
    pdl_wait_and_release();
    const int32_t s = blockIdx.x;
    int32_t before = 0;
    for (int32_t j = threadIdx.x; j < s; j += kThreads)
        before += (context_of(row_begin, pos_begin, j) + bs - 1) / bs;
    const int32_t offset = block_sum(before);
    const int32_t context = context_of(row_begin, pos_begin, s);
    const int32_t blocks = (context + bs - 1) / bs;
    for (int32_t j = threadIdx.x; j < table_stride; j += kThreads) {
        staged_table[int64_t(s) * table_stride + j] = j < blocks ? offset + j : 0;
        if (j < blocks)
            from[offset + j] = {table[int64_t(s) * table_stride + j], min(bs, context - j * bs)};
    }
}

// Block b: staging block b of both planes, [bs * nKV rows][D] of bf16, 8 dims a thread a step
// (one 8-byte code load, one 16-byte store).
template <typename Codec>
__global__ void __launch_bounds__(kThreads)
    decode_staged(kvq::CodedPlanes<Codec> kv, const StagedFrom* from, int32_t bs, int32_t nKV,
                  int32_t D, bf16* k_out, bf16* v_out) {
    pdl_wait_and_release();
    const StagedFrom src = from[blockIdx.x];
    const int32_t rows = bs * nKV, pieces = D / 8, G = Codec::groups(D);
    for (int32_t e = threadIdx.x; e < 2 * rows * pieces; e += kThreads) {
        const int32_t plane = e / (rows * pieces), rem = e % (rows * pieces);
        const int32_t r = rem / pieces, d0 = (rem % pieces) * 8; // r = offset * nKV + kv head
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (r / nKV < src.rows) {
            const int64_t row = int64_t(src.block) * rows + r;
            const auto* codes = plane ? kv.v : kv.k;
            const auto* scales = plane ? kv.v_scale : kv.k_scale;
            kvq::decode8<Codec>(*reinterpret_cast<const uint2*>(codes + row * D + d0),
                                Codec::scale_value(scales[row * G + kvq::group_of<Codec>(d0, D)]),
                                v);
        }
        bf16* dst = (plane ? v_out : k_out) + (int64_t(blockIdx.x) * rows + r) * D + d0;
        *reinterpret_cast<uint4*>(dst) = float_to_bf16x8(v);
    }
}

// Whether the codec's rows stage by decode_staged: 8-dim pieces that never straddle a scale
// group, 16-byte bf16 rows.
bool codec_rows_fit(const KvPlane& plane, int64_t D) {
    bool fits = false;
    kvq::dispatch_codec(plane, "paged_attention",
                        [&](auto codec) { fits = kvq::shape_fits<decltype(codec)>(D); });
    return fits && D % 8 == 0;
}

} // namespace

bool cudnn_prefill_coded(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                         const KvPlane& v_cache, const SeqBatch& batch, float scale,
                         const TensorView& out) {
    const int64_t D = q.size(2), nKV = k_cache.size(2), bs = batch.block_size;
    if (!cudnn_available() || !k_cache.quantized() || q.dtype != DType::BF16 ||
        out.dtype != DType::BF16 || k_cache.size(1) != bs || k_cache.size(3) != D ||
        !codec_rows_fit(k_cache, D) || cuda::capturing(ctx))
        return false;
    int64_t blocks = 0;
    for (int32_t s = 0; s < batch.num_seqs; ++s)
        blocks += (batch.host_pos_begin[s] + batch.rows(s) + bs - 1) / bs;
    const int64_t bucket = pow2_at_least(blocks, kMinStagingBlocks);
    if (2 * bucket * bs * nKV * D * int64_t(sizeof(bf16)) > kMaxStagingBytes) return false;
    Tensor staged_k, staged_v, staged_table, from;
    try {
        Allocator& alloc = device_allocator(ctx.device);
        staged_k = Tensor::empty(alloc, DType::BF16, {bucket, bs, nKV, D});
        staged_v = Tensor::empty(alloc, DType::BF16, {bucket, bs, nKV, D});
        staged_table = Tensor::empty(alloc, DType::I32, {batch.num_seqs, batch.block_table_stride});
        from = Tensor::empty(alloc, DType::I32, {blocks, 2});
    } catch (const Error& e) {
        if (e.category() == ErrorCategory::OutOfMemory) return false; // the flash kernel serves it
        throw;
    }
    auto* staged_from = reinterpret_cast<StagedFrom*>(from.ptr<int32_t>());
    launch_pdl(ctx, plan_staging, dim3(unsigned(batch.num_seqs)), dim3(kThreads), 0,
               batch.row_begin.ptr<int32_t>(), batch.pos_begin.ptr<int32_t>(),
               batch.block_table.ptr<int32_t>(), batch.block_table_stride, int32_t(bs),
               staged_table.ptr<int32_t>(), staged_from);
    check_launch("plan_staging");
    kvq::dispatch_codec(k_cache, "paged_attention", [&](auto codec) {
        using Codec = decltype(codec);
        launch_pdl(ctx, decode_staged<Codec>, dim3(unsigned(blocks)), dim3(kThreads), 0,
                   kvq::coded_planes<Codec>(k_cache, v_cache), staged_from, int32_t(bs),
                   int32_t(nKV), int32_t(D), staged_k.ptr<bf16>(), staged_v.ptr<bf16>());
    });
    check_launch("decode_staged");
    // The bucket's blocks past the staged ones, zeroed: no page of the table points there, but
    // an SDPA kernel that reads a whole key tile's pages must find finite values (0 x NaN is NaN
    // under the mask), and the pool hands back whatever memory last held.
    if (blocks < bucket)
        for (const Tensor* t : {&staged_k, &staged_v})
            cuda::fill_zero(ctx, t->view().narrow(0, blocks, bucket - blocks));
    SeqBatch staged = batch;
    staged.block_table = staged_table.view();
    staged.host_block_table = nullptr; // the staging ids live on the device only
    return cudnn_prefill(ctx, q, KvPlane(staged_k), KvPlane(staged_v), staged, scale, out);
}

} // namespace ninfer::ops::cuda
