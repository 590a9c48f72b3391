#include "ops/rms_norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/gated_rms_norm.h"
#include "ops/validate.h"

namespace ninfer::ops {

void rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset) {
    constexpr const char* op = "rms_norm";
    const int64_t rows = check_row_view(ctx, op, "x", x, -1, -1);
    const int64_t H = x.shape[x.ndim - 1];
    check_row_view(ctx, op, "y", y, rows, H);
    check_same_rows(op, "y", y, x);
    check_device(ctx, op, "w", w);
    check_shape(op, "w", w, {H});
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &w, &y});
        return cpu::rms_norm(ctx.cpu_mode, x, w, eps, y, weight_offset);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &w, &y});
        return cuda::rms_norm(ctx, x, w, eps, y, weight_offset);
    }
    no_backend(op, ctx);
}

void gated_rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& z,
                    const TensorView& w, float eps, const TensorView& y) {
    constexpr const char* op = "gated_rms_norm";
    const int64_t rows = check_row_view(ctx, op, "x", x, -1, -1);
    const int64_t D = x.shape[x.ndim - 1];
    check_row_view(ctx, op, "z", z, rows, D);
    check_row_view(ctx, op, "y", y, rows, D);
    check_same_rows(op, "z", z, x);
    check_same_rows(op, "y", y, x);
    check_device(ctx, op, "w", w);
    check_shape(op, "w", w, {D});
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &z, &w, &y});
        return cpu::gated_rms_norm(ctx.cpu_mode, x, z, w, eps, y);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &z, &w, &y});
        return cuda::gated_rms_norm(ctx, x, z, w, eps, y);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
