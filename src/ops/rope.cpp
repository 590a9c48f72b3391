#include "ops/rope.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void rope(const ExecContext& ctx, const TensorView& x, const TensorView& positions,
          int64_t rotary_dim, double theta) {
    constexpr const char* op = "rope";
    check_device(ctx, op, "x", x);
    check_device(ctx, op, "positions", positions);
    check_float(op, "x", x);
    check_rows_contiguous(op, "x", x);
    check_shape(op, "x", x, {-1, -1, -1});
    check_dtype(op, "positions", positions, DType::I32);
    check_shape(op, "positions", positions, {x.size(0)});
    require(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= x.size(2), op, ": rotary_dim ",
            rotary_dim, " must be even and within head dim ", x.size(2));
    require(theta > 0, op, ": theta must be positive");
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x});
        return cpu::rope(ctx.cpu_mode, x, positions, rotary_dim, theta);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x});
        return cuda::rope(ctx, x, positions, rotary_dim, theta);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
