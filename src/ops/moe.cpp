#include "ops/moe.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_grouped.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/validate.h"

namespace ninfer::ops {

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, HeldExperts held) {
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
    if (held.count < 0) held.count = E - held.first;
    require(held.first >= 0 && held.count >= 1 && held.first + held.count <= E, op,
            ": held experts [", held.first, ", +", held.count, ") outside the router's ", E);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        return cpu::moe_route(ctx.cpu_mode, router_logits, top_k, weights, ids, held.first,
                              held.count);
    case DeviceType::Cuda:
        return cuda::moe_route(ctx, router_logits, top_k, weights, ids, held.first, held.count);
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
                require(e >= -1 && e < E, op, ": expert id ", e, " outside [-1, ", E, ")");
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

namespace {

// A weight's logical shape (a 4-bit weight's last dim is its columns, not its packed bytes)
// against dims (-1: any).
void check_logical_shape(const char* op, const char* name, const WeightView& w,
                         const std::vector<int64_t>& dims) {
    bool ok = w.w.ndim == int(dims.size());
    for (size_t d = 0; ok && d < dims.size(); ++d) ok = dims[d] < 0 || w.size(int(d)) == dims[d];
    if (ok) return;
    std::string want = "[";
    for (size_t d = 0; d < dims.size(); ++d)
        want += (d ? ", " : "") + (dims[d] < 0 ? std::string("*") : std::to_string(dims[d]));
    fail_invalid(op, ": ", name, " must be ", want, "], got ", w.w.describe(),
                 w.is_grouped() ? concat(" (", w.cols, " columns)") : std::string());
}

// moe_experts over a stack that may be fp8 or groupwise: the CPU dequantizes the stacks (with
// ExecContext::cpu_w8a8, fp8 stacks also quantize their activations, as CUDA's W8A8 route);
// CUDA runs both fp8 stacks on the grouped tensor-core route (codes turned into bf16 in shared
// memory), and for layouts that route does not take (mixed stacks, block_cols % 64 != 0,
// groupwise stacks) dequantizes only the experts some pair is routed to into bf16 scratch (the
// others are never read). Both CUDA routes multiply by the same bf16 weights.
void moe_routed_experts(const ExecContext& ctx, const TensorView& h, const WeightView& gate_up,
                        const WeightView& down, const TensorView& ids, const TensorView& weights,
                        const TensorView& y) {
    if (!gate_up.is_quantized() && !down.is_quantized())
        return moe_experts(ctx, h, gate_up.w, down.w, ids, weights, y);
    if (ctx.device.is_cpu()) {
        const HostDense gu = dense_on_host(gate_up), dn = dense_on_host(down);
        if (!ctx.cpu_w8a8 || !gate_up.is_fp8() || !down.is_fp8())
            return moe_experts(ctx, h, gu.view, dn.view, ids, weights, y);
        // W8A8 emulation (moe_block validated the shapes): as CUDA's W8A8 grouped route.
        check_cpu_f32("moe_experts", {&h, &gu.view, &dn.view, &weights, &y});
        return cpu::moe_experts(ctx.cpu_mode, h, gu.view, dn.view, ids, weights, y,
                                gate_up.block_cols, down.block_cols);
    }
    if (cuda::moe_experts_fp8_fits(h, gate_up, down))
        return cuda::moe_experts_fp8(ctx, h, gate_up, down, ids, weights, y);
    Allocator& a = device_allocator(ctx.device);
    Tensor used = Tensor::empty(a, DType::I32, {gate_up.size(0)});
    cuda::mark_used_experts(ctx, ids, used);
    auto dense = [&](const WeightView& w) {
        if (!w.is_quantized()) return Tensor(nullptr, w.w);
        const std::vector<int64_t> dims = {w.size(0), w.size(1), w.size(2)}; // logical shape
        Tensor t = Tensor::empty(a, DType::BF16, dims.data(), 3);
        if (w.is_grouped())
            cuda::dequantize_grouped(ctx, w, t, used);
        else
            cuda::dequantize_fp8(ctx, w, t, used);
        return t;
    };
    const Tensor gu = dense(gate_up), dn = dense(down);
    moe_experts(ctx, h, gu, dn, ids, weights, y);
}

// moe_block as the composition of the ops it is defined by (the CPU body and CUDA's prefill
// route), with scratch from the device allocator. Arguments are validated by moe_block.
void moe_block_composed(const ExecContext& ctx, const TensorView& h,
                        const TensorView& router_logits, int64_t top_k,
                        const WeightView& experts_gate_up, const WeightView& experts_down,
                        const WeightView& shared_gate_up, const WeightView& shared_down,
                        const TensorView& y, int64_t first_expert) {
    const int64_t T = h.size(0), H = h.size(1), E = router_logits.size(1) - 1;
    const int64_t Is = shared_down.size(1);
    Allocator& a = device_allocator(ctx.device);
    Tensor route_w = Tensor::empty(a, DType::F32, {T, top_k});
    Tensor route_ids = Tensor::empty(a, DType::I32, {T, top_k});
    moe_route(ctx, router_logits.narrow(1, 0, E), top_k, route_w, route_ids,
              {first_expert, experts_gate_up.size(0)});
    moe_routed_experts(ctx, h, experts_gate_up, experts_down, route_ids, route_w, y);
    Tensor gate_up = Tensor::empty(a, h.dtype, {T, 2 * Is}),
           act = Tensor::empty(a, h.dtype, {T, Is});
    Tensor shared = Tensor::empty(a, h.dtype, {T, H});
    linear(ctx, h, shared_gate_up, gate_up);
    silu_mul(ctx, gate_up, act);
    linear(ctx, act, shared_down, shared);
    add_sigmoid_scaled(ctx, router_logits.narrow(1, E, 1), shared, y);
}

} // namespace

void moe_block(const ExecContext& ctx, const TensorView& h, const TensorView& router_logits,
               int64_t top_k, const WeightView& experts_gate_up, const WeightView& experts_down,
               const WeightView& shared_gate_up, const WeightView& shared_down,
               const TensorView& y, int64_t first_expert) {
    constexpr const char* op = "moe_block";
    const std::pair<const char*, const WeightView*> weights[] = {
        {"experts_gate_up", &experts_gate_up},
        {"experts_down", &experts_down},
        {"shared_gate_up", &shared_gate_up},
        {"shared_down", &shared_down}};
    for (auto [name, t] : {std::pair{"h", &h}, {"router_logits", &router_logits}, {"y", &y}})
        check_device(ctx, op, name, *t);
    check_float(op, "h", h);
    check_float(op, "y", y);
    bool any_fp8 = false, any_grouped = false;
    for (auto [name, w] : weights) {
        check_device(ctx, op, name, w->w);
        check_contiguous(op, name, w->w);
        if (w->is_quantized()) {
            check_weight(op, name, *w);
            check_device(ctx, op, name, w->scale);
            any_fp8 = any_fp8 || w->is_fp8();
            any_grouped = any_grouped || w->is_grouped();
        } else {
            check_float(op, name, w->w);
        }
    }
    check_shape(op, "h", h, {-1, -1});
    const int64_t T = h.size(0), H = h.size(1);
    check_logical_shape(op, "experts_gate_up", experts_gate_up, {-1, -1, H});
    const int64_t held = experts_gate_up.size(0), I = experts_gate_up.size(1) / 2;
    require(experts_gate_up.size(1) % 2 == 0, op,
            ": experts_gate_up rows must be even (gate | up)");
    check_logical_shape(op, "experts_down", experts_down, {held, H, I});
    check_logical_shape(op, "shared_gate_up", shared_gate_up, {-1, H});
    const int64_t Is = shared_gate_up.size(0) / 2;
    require(shared_gate_up.size(0) % 2 == 0, op, ": shared_gate_up rows must be even (gate | up)");
    check_logical_shape(op, "shared_down", shared_down, {H, Is});
    check_dtype(op, "router_logits", router_logits, DType::F32);
    check_shape(op, "router_logits", router_logits, {T, -1});
    const int64_t E = router_logits.size(1) - 1; // the router's experts
    require(first_expert >= 0 && first_expert + held <= E, op, ": the stacks' ", held,
            " experts from ", first_expert, " are not a run of the router's ", E);
    check_shape(op, "y", y, {T, H});
    require(top_k >= 1 && top_k <= E, op, ": top_k ", top_k, " outside [1, ", E, "]");
    for (auto [name, t] : {std::pair{"h", &h}, {"router_logits", &router_logits}, {"y", &y}})
        check_rows_contiguous(op, name, *t);
    require(y.data != h.data, op, ": y must not alias h");
    if (T == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&h, &y});
        for (auto [name, w] : weights)
            if (!w->is_quantized()) check_cpu_f32(op, {&w->w});
        return moe_block_composed(ctx, h, router_logits, top_k, experts_gate_up, experts_down,
                                  shared_gate_up, shared_down, y, first_expert);
    case DeviceType::Cuda:
        check_cuda_float(op, {&h, &y});
        if (any_fp8) check_dtype(op, "h", h, DType::BF16);
        if (any_grouped) check_dtype(op, "h", h, DType::BF16);
        for (auto [name, w] : weights)
            if (!w->is_quantized()) check_cuda_float(op, {&h, &w->w});
        // The fused decode kernels read dense, fp8 or groupwise weights (moe_decode.cu).
        if (cuda::moe_block_decode_fits(h, router_logits, top_k, experts_gate_up, experts_down,
                                        shared_gate_up, shared_down))
            return cuda::moe_block_decode(ctx, h, router_logits, top_k, experts_gate_up,
                                          experts_down, shared_gate_up, shared_down, y,
                                          first_expert);
        return moe_block_composed(ctx, h, router_logits, top_k, experts_gate_up, experts_down,
                                  shared_gate_up, shared_down, y, first_expert);
    }
    no_backend(op, ctx);
}

// The decode route is two kernels without host synchronisation; the composition synchronises
// only where moe_experts does.
bool moe_block_capturable(const ExecContext& ctx, int64_t T, int64_t top_k, int64_t H, int64_t I) {
    return moe_experts_capturable(ctx, T * top_k, H, I);
}

} // namespace ninfer::ops
