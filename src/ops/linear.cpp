#include "ops/linear.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void linear(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate) {
    constexpr const char* op = "linear";
    for (auto [name, t] : {std::pair{"x", &x}, {"w", &w}, {"y", &y}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
    }
    check_shape(op, "x", x, {-1, -1});
    check_shape(op, "w", w, {-1, x.size(1)});
    check_shape(op, "y", y, {x.size(0), w.size(0)});
    check_rows_contiguous(op, "x", x);
    check_contiguous(op, "w", w);
    check_rows_contiguous(op, "y", y);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &w, &y});
        return cpu::linear(ctx.cpu_mode, x, w, y, accumulate);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &w});
        require(y.dtype == x.dtype || y.dtype == DType::F32, op, ": y must be ",
                dtype_name(x.dtype), " or F32, got ", y.describe());
        return cuda::linear(ctx, x, w, y, accumulate);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
