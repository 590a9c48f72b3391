#include "ops/bias_act.h"

#include "ops/cpu/vision_ops.h"
#include "ops/cuda/vision_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void bias_act(const ExecContext& ctx, const TensorView& y, const TensorView& b, Activation act) {
    constexpr const char* op = "bias_act";
    check_row_view(ctx, op, "y", y, -1, -1);
    check_shape(op, "y", y, {-1, -1});
    check_device(ctx, op, "b", b);
    check_float(op, "b", b);
    check_shape(op, "b", b, {y.size(1)});
    check_contiguous(op, "b", b);
    require(act == Activation::None || act == Activation::GeluTanh || act == Activation::GeluErf,
            op, ": unknown activation");
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&y, &b});
        return cpu::bias_act(ctx.cpu_mode, y, b, act);
    case DeviceType::Cuda:
        check_cuda_float(op, {&y});
        if (b.dtype != DType::F32) check_cuda_float(op, {&y, &b});
        return cuda::bias_act(ctx, y, b, act);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
