#include "ops/rope_table.h"

#include "ops/cpu/vision_ops.h"
#include "ops/cuda/vision_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void rope_table(const ExecContext& ctx, const TensorView& x, const TensorView& cos,
                const TensorView& sin, int64_t rotary_dim) {
    constexpr const char* op = "rope_table";
    check_device(ctx, op, "x", x);
    check_float(op, "x", x);
    check_rows_contiguous(op, "x", x);
    check_shape(op, "x", x, {-1, -1, -1});
    require(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= x.size(2), op, ": rotary_dim ",
            rotary_dim, " must be even and within head dim ", x.size(2));
    for (auto [name, t] : {std::pair{"cos", &cos}, {"sin", &sin}}) {
        check_device(ctx, op, name, *t);
        check_dtype(op, name, *t, DType::F32);
        check_shape(op, name, *t, {x.size(0), rotary_dim / 2});
        check_contiguous(op, name, *t);
    }
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x});
        return cpu::rope_table(ctx.cpu_mode, x, cos, sin, rotary_dim);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x});
        return cuda::rope_table(ctx, x, cos, sin, rotary_dim);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
