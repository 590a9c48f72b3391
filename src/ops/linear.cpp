#include "ops/linear.h"

#include <algorithm>

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_grouped.h"
#include "ops/memory.h"
#include "ops/rms_norm.h"
#include "ops/validate.h"

namespace ninfer::ops {

void linear(const ExecContext& ctx, const TensorView& x, const WeightView& wv, const TensorView& y,
            bool accumulate) {
    constexpr const char* op = "linear";
    const TensorView& w = wv.w;
    for (auto [name, t] : {std::pair{"x", &x}, {"w", &w}, {"y", &y}}) check_device(ctx, op, name, *t);
    check_float(op, "x", x);
    check_float(op, "y", y);
    if (wv.is_quantized()) {
        check_weight(op, "w", wv);
        check_device(ctx, op, "w scale", wv.scale);
    } else {
        check_float(op, "w", w);
    }
    check_shape(op, "x", x, {-1, -1});
    require(w.ndim == 2 && wv.size(1) == x.size(1), op, ": w must be [N, ", x.size(1),
            "] (its logical shape), got ", w.describe());
    check_shape(op, "y", y, {x.size(0), w.size(0)});
    check_rows_contiguous(op, "x", x);
    check_contiguous(op, "w", w);
    check_rows_contiguous(op, "y", y);
    switch (ctx.device.type) {
    case DeviceType::Cpu: {
        const HostDense dense = dense_on_host(wv);
        check_cpu_f32(op, {&x, &dense.view, &y});
        if (!ctx.cpu_w8a8 || !wv.is_fp8())
            return cpu::linear(ctx.cpu_mode, x, dense.view, y, accumulate);
        // W8A8 emulation: the rows quantized per scale block's columns, as CUDA's W8A8 route.
        const int64_t T = x.size(0), K = x.size(1);
        Tensor xq = Tensor::empty(device_allocator(ctx.device), DType::F32, {T, K});
        for (int64_t t = 0; t < T; ++t)
            std::copy_n(x.ptr<float>() + t * x.stride[0], K, xq.ptr<float>() + t * K);
        cpu::quantize_rows_e4m3(xq.ptr<float>(), T, K, K, wv.block_cols);
        return cpu::linear(ctx.cpu_mode, xq.view(), dense.view, y, accumulate);
    }
    case DeviceType::Cuda:
        require(y.dtype == x.dtype || y.dtype == DType::F32, op, ": y must be ",
                dtype_name(x.dtype), " or F32, got ", y.describe());
        if (wv.is_fp8()) {
            check_dtype(op, "x", x, DType::BF16);
            return cuda::linear_fp8(ctx, x, wv, y, accumulate);
        }
        if (wv.is_grouped()) {
            check_dtype(op, "x", x, DType::BF16);
            return cuda::linear_grouped(ctx, x, wv, y, accumulate);
        }
        check_cuda_float(op, {&x, &w});
        return cuda::linear(ctx, x, w, y, accumulate);
    }
    no_backend(op, ctx);
}

namespace {

// rms_norm_linear's argument checks (op: the caller's name, for the messages).
void check_norm_linear(const char* op, const ExecContext& ctx, const TensorView& x,
                       const TensorView& norm_w, const WeightView& wv, const TensorView& y,
                       const TensorView& h) {
    for (auto [name, t] :
         {std::pair{"x", &x}, {"norm_w", &norm_w}, {"w", &wv.w}, {"y", &y}, {"h", &h}}) {
        check_device(ctx, op, name, *t);
        if (t != &wv.w || !wv.is_quantized()) check_float(op, name, *t);
    }
    const TensorView& w = wv.w;
    check_shape(op, "x", x, {-1, -1});
    check_shape(op, "norm_w", norm_w, {x.size(1)});
    require(w.ndim == 2 && wv.size(1) == x.size(1), op, ": w must be [N, ", x.size(1),
            "] (its logical shape), got ", w.describe());
    check_shape(op, "y", y, {x.size(0), w.size(0)});
    check_shape(op, "h", h, {x.size(0), x.size(1)});
    check_rows_contiguous(op, "x", x);
    check_rows_contiguous(op, "h", h);
}

// rms_norm_linear after its checks: the fused kernel where the backend has one, else the two ops.
void norm_linear_checked(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                         float eps, const WeightView& wv, const TensorView& y,
                         const TensorView& h) {
    if (ctx.device.type == DeviceType::Cuda &&
        cuda::rms_norm_linear_fused(ctx, x, norm_w, eps, wv, y, h))
        return;
    rms_norm(ctx, x, norm_w, eps, h);
    linear(ctx, h, wv, y);
}

} // namespace

void rms_norm_linear(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                     float eps, const WeightView& wv, const TensorView& y, const TensorView& h) {
    check_norm_linear("rms_norm_linear", ctx, x, norm_w, wv, y, h);
    norm_linear_checked(ctx, x, norm_w, eps, wv, y, h);
}

void rms_norm_linear_pair(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const WeightView& w, const TensorView& y,
                          const WeightView& w2, const TensorView& y2, const TensorView& h) {
    constexpr const char* op = "rms_norm_linear_pair";
    check_norm_linear(op, ctx, x, norm_w, w, y, h);
    check_device(ctx, op, "w2", w2.w);
    check_device(ctx, op, "y2", y2);
    if (!w2.is_quantized()) check_float(op, "w2", w2.w);
    check_float(op, "y2", y2);
    require(w2.w.ndim == 2 && w2.size(1) == x.size(1), op, ": w2 must be [N2, ", x.size(1),
            "] (its logical shape), got ", w2.w.describe());
    check_shape(op, "y2", y2, {x.size(0), w2.size(0)});
    if (ctx.device.type == DeviceType::Cuda &&
        cuda::rms_norm_linear_fused(ctx, x, norm_w, eps, w, y, h, &w2, &y2))
        return;
    norm_linear_checked(ctx, x, norm_w, eps, w, y, h);
    linear(ctx, h, w2, y2);
}

} // namespace ninfer::ops
