#include "ops/validate.h"

#include <algorithm>

#include "core/error.h"

namespace ninfer::ops {

void check_device(const ExecContext& ctx, const char* op, const char* name, const TensorView& t) {
    require(t.data != nullptr || t.numel() == 0, op, ": ", name, " is null");
    require(t.device == ctx.device, op, ": ", name, " is on ", device_name(t.device),
            " but the op runs on ", device_name(ctx.device));
}

void check_dtype(const char* op, const char* name, const TensorView& t, DType dtype) {
    require(t.dtype == dtype, op, ": ", name, " must be ", dtype_name(dtype), ", got ",
            t.describe());
}

void check_gdn_state_dtype(const char* op, const char* name, const TensorView& t) {
    require(t.dtype == DType::F32 || t.dtype == DType::BF16, op, ": ", name,
            " must be F32 or BF16, got ", t.describe());
}

void check_float(const char* op, const char* name, const TensorView& t) {
    require(is_float(t.dtype), op, ": ", name, " must be a float tensor, got ", t.describe());
}

void check_shape(const char* op, const char* name, const TensorView& t,
                 std::initializer_list<int64_t> dims) {
    bool ok = t.ndim == int(dims.size());
    int d = 0;
    for (int64_t want : dims) {
        if (ok && want >= 0 && t.shape[d] != want) ok = false;
        ++d;
    }
    if (ok) return;
    std::string expected = "[";
    d = 0;
    for (int64_t want : dims)
        expected += (d++ ? ", " : "") + (want < 0 ? "*" : std::to_string(want));
    fail_invalid(op, ": ", name, " must have shape ", expected, "], got ", t.describe());
}

int64_t check_row_view(const ExecContext& ctx, const char* op, const char* name,
                       const TensorView& t, int64_t rows, int64_t cols) {
    check_device(ctx, op, name, t);
    check_float(op, name, t);
    require(t.ndim == 2 || t.ndim == 3, op, ": ", name, " must be [R, N] or [A, B, N], got ",
            t.describe());
    check_rows_contiguous(op, name, t);
    const int64_t r = t.ndim == 3 ? t.shape[0] * t.shape[1] : t.shape[0];
    require(rows < 0 || r == rows, op, ": ", name, " has ", r, " rows, expected ", rows);
    require(cols < 0 || t.shape[t.ndim - 1] == cols, op, ": ", name, " rows have ",
            t.shape[t.ndim - 1], " values, expected ", cols);
    return r;
}

void check_same_rows(const char* op, const char* name, const TensorView& t, const TensorView& ref) {
    bool same = t.ndim == ref.ndim;
    for (int d = 0; same && d + 1 < t.ndim; ++d) same = t.shape[d] == ref.shape[d];
    require(same, op, ": ", name, " ", t.describe(), " does not match the rows of ",
            ref.describe());
}

void check_rows_contiguous(const char* op, const char* name, const TensorView& t) {
    require(t.rows_contiguous(), op, ": ", name,
            " must have a contiguous last dim: ", t.describe());
}

void check_contiguous(const char* op, const char* name, const TensorView& t) {
    require(t.is_contiguous(), op, ": ", name, " must be contiguous: ", t.describe());
}

void check_seq_batch(const char* op, const SeqBatch& b, int64_t rows, int64_t num_slots,
                     int64_t num_blocks) {
    require(b.num_seqs >= 0 && b.host_row_begin, op, ": empty sequence batch");
    require(b.num_rows == rows, op, ": batch has ", b.num_rows, " rows, tensors have ", rows);
    require(b.host_row_begin[0] == 0 && b.host_row_begin[b.num_seqs] == rows, op,
            ": row_begin must span [0, ", rows, ")");
    for (int32_t s = 0; s < b.num_seqs; ++s) {
        require(b.rows(s) >= 0, op, ": sequence ", s, " has negative rows");
        require(b.host_pos_begin[s] >= 0, op, ": sequence ", s, " has negative position");
        if (num_slots >= 0)
            require(b.host_state_slot[s] >= 0 && b.host_state_slot[s] < num_slots, op,
                    ": sequence ", s, " state slot ", b.host_state_slot[s], " outside [0, ",
                    num_slots, ")");
        if (b.has_snapshots() && b.host_snapshot_row[s] >= 0) {
            require(b.rows(s) <= kMaxSnapshotRows, op, ": sequence ", s, " has ", b.rows(s),
                    " rows; per-row snapshots allow at most ", kMaxSnapshotRows);
            if (num_slots >= 0)
                require(b.host_snapshot_row[s] + std::max(b.rows(s) - 1, 0) <= num_slots, op,
                        ": sequence ", s, " snapshot rows from ", b.host_snapshot_row[s],
                        " exceed the ", num_slots, " state rows");
        }
        if (num_blocks >= 0) {
            int64_t context = int64_t(b.host_pos_begin[s]) + b.rows(s);
            int64_t needed = (context + b.block_size - 1) / b.block_size;
            require(b.block_size > 0 && needed <= b.block_table_stride, op, ": sequence ", s,
                    " needs ", needed, " KV blocks, table holds ", b.block_table_stride);
            for (int64_t i = 0; i < needed; ++i) {
                int32_t block = b.host_block_table[s * b.block_table_stride + i];
                require(block >= 0 && block < num_blocks, op, ": sequence ", s, " block ", i,
                        " id ", block, " outside [0, ", num_blocks, ")");
            }
        }
    }
}

void no_backend(const char* op, const ExecContext& ctx) {
    fail(ErrorCategory::Unsupported, op, ": no implementation for device ",
         device_name(ctx.device));
}

void check_cpu_f32(const char* op, std::initializer_list<const TensorView*> tensors) {
    for (const TensorView* t : tensors)
        if (t && !t->empty() && is_float(t->dtype))
            require(t->dtype == DType::F32, op, ": the CPU backend computes in F32, got ",
                    t->describe());
}

void check_cuda_float(const char* op, std::initializer_list<const TensorView*> tensors) {
    const TensorView* first = nullptr;
    for (const TensorView* t : tensors) {
        if (!t || t->empty() || !is_float(t->dtype)) continue;
        require(t->dtype == DType::F32 || t->dtype == DType::BF16, op,
                ": CUDA kernels take F32 or BF16, got ", t->describe());
        if (!first) first = t;
        require(t->dtype == first->dtype, op, ": mixed dtypes ", first->describe(), " and ",
                t->describe());
    }
}

} // namespace ninfer::ops
