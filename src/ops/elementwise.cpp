#include "ops/elementwise.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void add(const ExecContext& ctx, const TensorView& a, const TensorView& b, const TensorView& out) {
    constexpr const char* op = "add";
    const int64_t rows = check_row_view(ctx, op, "a", a, -1, -1);
    const int64_t n = a.shape[a.ndim - 1];
    check_row_view(ctx, op, "b", b, rows, n);
    check_row_view(ctx, op, "out", out, rows, n);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&a, &b, &out});
        return cpu::add(ctx.cpu_mode, a, b, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&a, &b, &out});
        return cuda::add(ctx, a, b, out);
    }
    no_backend(op, ctx);
}

void sigmoid_mul(const ExecContext& ctx, const TensorView& x, const TensorView& gate,
                 const TensorView& out) {
    constexpr const char* op = "sigmoid_mul";
    const int64_t rows = check_row_view(ctx, op, "x", x, -1, -1);
    const int64_t n = x.shape[x.ndim - 1];
    check_row_view(ctx, op, "gate", gate, rows, n);
    check_row_view(ctx, op, "out", out, rows, n);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &gate, &out});
        return cpu::sigmoid_mul(ctx.cpu_mode, x, gate, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &gate, &out});
        return cuda::sigmoid_mul(ctx, x, gate, out);
    }
    no_backend(op, ctx);
}

void silu_mul(const ExecContext& ctx, const TensorView& gate_up, const TensorView& out) {
    constexpr const char* op = "silu_mul";
    const int64_t rows = check_row_view(ctx, op, "out", out, -1, -1);
    check_row_view(ctx, op, "gate_up", gate_up, rows, 2 * out.shape[out.ndim - 1]);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&gate_up, &out});
        return cpu::silu_mul(ctx.cpu_mode, gate_up, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&gate_up, &out});
        return cuda::silu_mul(ctx, gate_up, out);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
