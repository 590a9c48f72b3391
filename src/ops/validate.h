// Shared argument checks for op dispatchers. Each raises InvalidArgument naming the op and tensor.
#pragma once

#include <initializer_list>

#include "core/error.h"

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/seq_batch.h"

namespace ninfer::ops {

void check_device(const ExecContext& ctx, const char* op, const char* name, const TensorView& t);
void check_dtype(const char* op, const char* name, const TensorView& t, DType dtype);
void check_float(const char* op, const char* name, const TensorView& t);
// A GDN recurrent state (ops/gated_delta_rule.h): F32 or BF16 storage, on every backend.
void check_gdn_state_dtype(const char* op, const char* name, const TensorView& t);
// Shape check; a dim of -1 matches anything.
void check_shape(const char* op, const char* name, const TensorView& t,
                 std::initializer_list<int64_t> dims);
// A row view: [R, N] or [A, B, N] (R = A * B rows) with a contiguous last dim; rows < 0 or
// cols < 0 match anything. Returns the row count.
int64_t check_row_view(const ExecContext& ctx, const char* op, const char* name,
                       const TensorView& t, int64_t rows, int64_t cols);
// Two row views with the same leading shape.
void check_same_rows(const char* op, const char* name, const TensorView& t, const TensorView& ref);
void check_rows_contiguous(const char* op, const char* name, const TensorView& t);
void check_contiguous(const char* op, const char* name, const TensorView& t);
// The host arrays of a SeqBatch are consistent with num_rows rows and the given slot/block pools.
void check_seq_batch(const char* op, const SeqBatch& batch, int64_t rows, int64_t num_slots,
                     int64_t num_blocks);
[[noreturn]] void no_backend(const char* op, const ExecContext& ctx);
// CPU backend computes in f32: every float tensor it sees must be F32.
void check_cpu_f32(const char* op, std::initializer_list<const TensorView*> tensors);
// CUDA kernels take F32 or BF16: the listed float tensors must share one of those dtypes.
void check_cuda_float(const char* op, std::initializer_list<const TensorView*> tensors);

} // namespace ninfer::ops
