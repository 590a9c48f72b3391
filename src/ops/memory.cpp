#include "ops/memory.h"

#include <cstring>
#include <vector>

#include "ops/validate.h"

namespace ninfer::ops {
namespace {

void convert_host(const TensorView& src, const TensorView& dst, const char* op) {
    check_contiguous(op, "src", src);
    check_contiguous(op, "dst", dst);
    require(src.numel() == dst.numel(), op, ": ", src.describe(), " and ", dst.describe(),
            " differ in size");
    const int64_t n = src.numel();
    if (src.dtype == dst.dtype) {
        std::memcpy(dst.data, src.data, size_t(src.nbytes()));
        return;
    }
    require(is_float(src.dtype) && is_float(dst.dtype), op, ": cannot convert ",
            dtype_name(src.dtype), " to ", dtype_name(dst.dtype));
    if (dst.dtype == DType::F32) return convert_to_f32(src.data, src.dtype, dst.ptr<float>(), n);
    if (src.dtype == DType::F32) return convert_from_f32(src.ptr<float>(), dst.data, dst.dtype, n);
    std::vector<float> tmp(static_cast<size_t>(n));
    convert_to_f32(src.data, src.dtype, tmp.data(), n);
    convert_from_f32(tmp.data(), dst.data, dst.dtype, n);
}

} // namespace

Allocator& device_allocator(Device device) {
    if (device.is_cpu()) return cpu_allocator();
    fail(ErrorCategory::Unsupported, "no allocator for device ", device_name(device),
         " (built without CUDA)");
}

void upload(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    require(src.device.is_cpu(), "upload: source must be on the host");
    check_device(ctx, "upload", "dst", dst);
    if (ctx.device.is_cpu()) return convert_host(src, dst, "upload");
    no_backend("upload", ctx);
}

void download(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    require(dst.device.is_cpu(), "download: destination must be on the host");
    check_device(ctx, "download", "src", src);
    if (ctx.device.is_cpu()) return convert_host(src, dst, "download");
    no_backend("download", ctx);
}

void fill_zero(const ExecContext& ctx, const TensorView& dst) {
    check_device(ctx, "fill_zero", "dst", dst);
    check_contiguous("fill_zero", "dst", dst);
    if (ctx.device.is_cpu()) {
        std::memset(dst.data, 0, size_t(dst.nbytes()));
        return;
    }
    no_backend("fill_zero", ctx);
}

void copy(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    check_device(ctx, "copy", "src", src);
    check_device(ctx, "copy", "dst", dst);
    check_dtype("copy", "dst", dst, src.dtype);
    if (ctx.device.is_cpu()) return convert_host(src, dst, "copy");
    no_backend("copy", ctx);
}

void synchronize(const ExecContext& ctx) {
    if (ctx.device.is_cpu()) return;
    no_backend("synchronize", ctx);
}

} // namespace ninfer::ops
