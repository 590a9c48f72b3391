#include "ops/span_attention.h"

#include "ops/cpu/dflash_ops.h"
#include "ops/cuda/dflash_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

constexpr const char* kOp = "span_attention";

// An I32 [dims...] view on the execution device, contiguous (the kernels index it densely).
void check_index_view(const ExecContext& ctx, const char* name, const TensorView& t,
                      std::initializer_list<int64_t> dims) {
    check_device(ctx, kOp, name, t);
    check_dtype(kOp, name, t, DType::I32);
    check_shape(kOp, name, t, dims);
    check_contiguous(kOp, name, t);
}

// The host arrays: each row names a table row and a non-empty span inside the table's reach,
// and every block the span touches is a block of the cache.
void check_spans(const SpanBatch& s, int64_t rows, int64_t num_blocks, int64_t block_size) {
    require(s.num_rows == rows, kOp, ": spans have ", s.num_rows, " rows, q has ", rows);
    require(s.block_size == block_size, kOp, ": spans.block_size ", s.block_size,
            " differs from the cache's ", block_size);
    require(s.num_table_rows >= 0 && s.block_table_stride >= 0, kOp,
            ": negative block table shape [", s.num_table_rows, ", ", s.block_table_stride, "]");
    if (rows == 0) return;
    require(s.host_table_row && s.host_key_begin && s.host_key_end && s.host_block_table, kOp,
            ": a host span array is null");
    const int64_t reach = int64_t(s.block_table_stride) * block_size;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = s.host_table_row[r], b = s.host_key_begin[r], e = s.host_key_end[r];
        require(t >= 0 && t < s.num_table_rows, kOp, ": row ", r, " table row ", t, " outside [0, ",
                s.num_table_rows, ")");
        require(0 <= b && b < e && e <= reach, kOp, ": row ", r, " span [", b, ", ", e,
                ") must be non-empty and inside [0, ", reach, ")");
        for (int64_t i = b / block_size; i <= (e - 1) / block_size; ++i) {
            const int32_t block = s.host_block_table[t * s.block_table_stride + i];
            require(block >= 0 && block < num_blocks, kOp, ": row ", r, " (table row ", t,
                    ") block ", i, " id ", block, " outside [0, ", num_blocks, ")");
        }
    }
}

} // namespace

void span_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out) {
    check_device(ctx, kOp, "q", q);
    check_float(kOp, "q", q);
    check_shape(kOp, "q", q, {-1, -1, -1});
    check_rows_contiguous(kOp, "q", q);
    const int64_t R = q.size(0), nH = q.size(1), D = q.size(2);
    check_device(ctx, kOp, "out", out);
    check_dtype(kOp, "out", out, q.dtype);
    check_shape(kOp, "out", out, {R, nH, D});
    check_contiguous(kOp, "out", out);
    for (auto [name, t] : {std::pair{"k_cache", &k_cache}, {"v_cache", &v_cache}}) {
        check_device(ctx, kOp, name, *t);
        check_dtype(kOp, name, *t, q.dtype);
        check_shape(kOp, name, *t, {k_cache.size(0), k_cache.size(1), k_cache.size(2), D});
        check_contiguous(kOp, name, *t);
    }
    const int64_t NB = k_cache.size(0), bs = k_cache.size(1), nKV = k_cache.size(2);
    require(bs > 0 && nKV > 0 && nH % nKV == 0, kOp, ": ", nH, " query heads do not group over ",
            nKV, " KV heads (block size ", bs, ")");
    check_spans(spans, R, NB, bs);
    check_index_view(ctx, "spans.table_row", spans.table_row, {R});
    check_index_view(ctx, "spans.key_begin", spans.key_begin, {R});
    check_index_view(ctx, "spans.key_end", spans.key_end, {R});
    check_index_view(ctx, "spans.block_table", spans.block_table,
                     {spans.num_table_rows, spans.block_table_stride});
    if (R == 0 || nH == 0 || D == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(kOp, {&q, &k_cache, &v_cache, &out});
        return cpu::span_attention(ctx.cpu_mode, q, k_cache, v_cache, spans, scale, out);
    case DeviceType::Cuda:
        check_cuda_float(kOp, {&q, &k_cache, &v_cache, &out});
        return cuda::span_attention(ctx, q, k_cache, v_cache, spans, scale, out);
    }
    no_backend(kOp, ctx);
}

} // namespace ninfer::ops
