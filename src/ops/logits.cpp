#include "ops/logits.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void logprobs_top_k(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs) {
    constexpr const char* op = "logprobs_top_k";
    check_device(ctx, op, "logits", logits);
    check_device(ctx, op, "lse", lse);
    check_dtype(op, "logits", logits, DType::F32);
    check_shape(op, "logits", logits, {-1, -1});
    check_rows_contiguous(op, "logits", logits);
    const int64_t R = logits.size(0);
    require(vocab_limit >= 1 && vocab_limit <= logits.size(1), op, ": vocab_limit ", vocab_limit,
            " outside [1, ", logits.size(1), "]");
    check_dtype(op, "lse", lse, DType::F32);
    check_shape(op, "lse", lse, {R});
    if (!ids.empty()) {
        check_device(ctx, op, "ids", ids);
        check_device(ctx, op, "logprobs", logprobs);
        check_dtype(op, "ids", ids, DType::I32);
        check_dtype(op, "logprobs", logprobs, DType::F32);
        check_shape(op, "ids", ids, {R, -1});
        check_shape(op, "logprobs", logprobs, {R, ids.size(1)});
        check_rows_contiguous(op, "ids", ids);
        check_rows_contiguous(op, "logprobs", logprobs);
        require(ids.size(1) <= vocab_limit, op, ": k ", ids.size(1), " exceeds the vocabulary");
    }
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        return cpu::logprobs_top_k(ctx.cpu_mode, logits, vocab_limit, lse, ids, logprobs);
    case DeviceType::Cuda:
        return cuda::logprobs_top_k(ctx, logits, vocab_limit, lse, ids, logprobs);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
