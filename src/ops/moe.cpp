#include "ops/moe.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids) {
    constexpr const char* op = "moe_route";
    for (auto [name, t] :
         {std::pair{"router_logits", &router_logits}, {"weights", &weights}, {"ids", &ids}}) {
        check_device(ctx, op, name, *t);
        check_rows_contiguous(op, name, *t);
    }
    check_dtype(op, "router_logits", router_logits, DType::F32);
    check_shape(op, "router_logits", router_logits, {-1, -1});
    const int64_t T = router_logits.size(0), E = router_logits.size(1);
    require(top_k >= 1 && top_k <= E, op, ": top_k ", top_k, " outside [1, ", E, "]");
    check_dtype(op, "weights", weights, DType::F32);
    check_dtype(op, "ids", ids, DType::I32);
    check_shape(op, "weights", weights, {T, top_k});
    check_shape(op, "ids", ids, {T, top_k});
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        return cpu::moe_route(ctx.cpu_mode, router_logits, top_k, weights, ids);
    case DeviceType::Cuda:
        return cuda::moe_route(ctx, router_logits, top_k, weights, ids);
    }
    no_backend(op, ctx);
}

void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y) {
    constexpr const char* op = "moe_experts";
    for (auto [name, t] : {std::pair{"x", &x},
                           {"gate_up", &gate_up},
                           {"down", &down},
                           {"ids", &ids},
                           {"weights", &weights},
                           {"y", &y}})
        check_device(ctx, op, name, *t);
    for (auto [name, t] : {std::pair{"x", &x}, {"gate_up", &gate_up}, {"down", &down}, {"y", &y}})
        check_float(op, name, *t);
    check_shape(op, "x", x, {-1, -1});
    const int64_t T = x.size(0), H = x.size(1);
    check_shape(op, "gate_up", gate_up, {-1, -1, H});
    const int64_t E = gate_up.size(0), I = gate_up.size(1) / 2;
    require(gate_up.size(1) % 2 == 0, op, ": gate_up rows must be even (gate | up)");
    check_shape(op, "down", down, {E, H, I});
    check_shape(op, "ids", ids, {T, -1});
    check_shape(op, "weights", weights, {T, ids.size(1)});
    check_shape(op, "y", y, {T, H});
    check_dtype(op, "ids", ids, DType::I32);
    check_dtype(op, "weights", weights, DType::F32);
    check_contiguous(op, "gate_up", gate_up);
    check_contiguous(op, "down", down);
    for (auto [name, t] : {std::pair{"x", &x}, {"ids", &ids}, {"weights", &weights}, {"y", &y}})
        check_rows_contiguous(op, name, *t);
    require(y.data != x.data, op, ": y must not alias x");
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &gate_up, &down, &y});
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < ids.size(1); ++j) {
                const int32_t e = ids.ptr<int32_t>()[t * ids.stride[0] + j];
                require(e >= 0 && e < E, op, ": expert id ", e, " outside [0, ", E, ")");
            }
        return cpu::moe_experts(ctx.cpu_mode, x, gate_up, down, ids, weights, y);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &gate_up, &down, &y});
        return cuda::moe_experts(ctx, x, gate_up, down, ids, weights, y);
    }
    no_backend(op, ctx);
}

bool moe_experts_capturable(const ExecContext& ctx, int64_t pairs, int64_t H, int64_t I) {
    if (ctx.device.is_cpu()) return false;
    return cuda::moe_experts_capturable(pairs, H, I);
}

void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y) {
    constexpr const char* op = "add_sigmoid_scaled";
    for (auto [name, t] : {std::pair{"gate_logit", &gate_logit}, {"shared", &shared}, {"y", &y}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
    }
    check_shape(op, "y", y, {-1, -1});
    check_shape(op, "gate_logit", gate_logit, {y.size(0), 1});
    check_dtype(op, "gate_logit", gate_logit, DType::F32);
    check_shape(op, "shared", shared, {y.size(0), y.size(1)});
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&gate_logit, &shared, &y});
        return cpu::add_sigmoid_scaled(ctx.cpu_mode, gate_logit, shared, y);
    case DeviceType::Cuda:
        check_cuda_float(op, {&shared, &y});
        return cuda::add_sigmoid_scaled(ctx, gate_logit, shared, y);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
