#include "ops/layer_norm.h"

#include "ops/cpu/vision_ops.h"
#include "ops/cuda/vision_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void layer_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                const TensorView& b, float eps, const TensorView& y) {
    constexpr const char* op = "layer_norm";
    const int64_t rows = check_row_view(ctx, op, "x", x, -1, -1);
    const int64_t K = x.shape[x.ndim - 1];
    check_row_view(ctx, op, "y", y, rows, K);
    check_same_rows(op, "y", y, x);
    for (auto [name, t] : {std::pair{"w", &w}, {"b", &b}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_shape(op, name, *t, {K});
        check_contiguous(op, name, *t);
    }
    require(b.dtype == w.dtype, op, ": w and b must share one dtype, got ", w.describe(), " and ",
            b.describe());
    require(eps >= 0.0f, op, ": eps must not be negative");
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &w, &b, &y});
        return cpu::layer_norm(ctx.cpu_mode, x, w, b, eps, y);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &y});
        if (w.dtype != DType::F32) check_cuda_float(op, {&x, &w});
        return cuda::layer_norm(ctx, x, w, b, eps, y);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
