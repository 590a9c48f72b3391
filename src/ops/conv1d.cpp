#include "ops/conv1d.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

// The CPU body keeps the K-1 history values of a channel on the stack.
constexpr int64_t kMaxConvKernel = 9;

void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y) {
    constexpr const char* op = "causal_conv1d_silu";
    for (auto [name, t] : {std::pair{"x", &x}, {"w", &w}, {"conv_state", &conv_state}, {"y", &y}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
    }
    check_shape(op, "x", x, {-1, -1});
    const int64_t C = x.size(1);
    check_shape(op, "w", w, {C, -1});
    const int64_t K = w.size(1);
    require(K >= 2 && K <= kMaxConvKernel, op, ": kernel width ", K, " outside [2, ",
            kMaxConvKernel, "]");
    check_shape(op, "conv_state", conv_state, {-1, C, K - 1});
    check_shape(op, "y", y, {x.size(0), C});
    check_rows_contiguous(op, "x", x);
    check_contiguous(op, "w", w);
    check_contiguous(op, "conv_state", conv_state);
    check_rows_contiguous(op, "y", y);
    require(y.data != x.data, op, ": y must not alias x");
    check_seq_batch(op, batch, x.size(0), conv_state.size(0), -1);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &w, &conv_state, &y});
        return cpu::causal_conv1d_silu(ctx.cpu_mode, x, w, batch, conv_state, y);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &w, &conv_state, &y});
        return cuda::causal_conv1d_silu(ctx, x, w, batch, conv_state, y);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
