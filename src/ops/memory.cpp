#include "ops/memory.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/philox.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/linear.h"
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
    return cuda::allocator(device);
}

void upload(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    require(src.device.is_cpu(), "upload: source must be on the host");
    check_device(ctx, "upload", "dst", dst);
    check_contiguous("upload", "dst", dst);
    require(src.numel() == dst.numel(), "upload: ", src.describe(), " and ", dst.describe(),
            " differ in size");
    if (ctx.device.is_cpu()) return convert_host(src, dst, "upload");
    check_contiguous("upload", "src", src);
    return cuda::upload(ctx, src, dst);
}

void download(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    require(dst.device.is_cpu(), "download: destination must be on the host");
    check_device(ctx, "download", "src", src);
    check_contiguous("download", "src", src);
    require(src.numel() == dst.numel(), "download: ", src.describe(), " and ", dst.describe(),
            " differ in size");
    if (ctx.device.is_cpu()) return convert_host(src, dst, "download");
    check_contiguous("download", "dst", dst);
    return cuda::download(ctx, src, dst);
}

void fill_zero(const ExecContext& ctx, const TensorView& dst) {
    check_device(ctx, "fill_zero", "dst", dst);
    check_contiguous("fill_zero", "dst", dst);
    if (ctx.device.is_cpu()) {
        std::memset(dst.data, 0, size_t(dst.nbytes()));
        return;
    }
    return cuda::fill_zero(ctx, dst);
}

namespace {

// What every copy checks: src on from's device and dst on to's, one dtype, both contiguous, the
// same size (index >= 0: the pair's place in a batch, named in the error).
void check_copy(const char* op, const ExecContext& from, const TensorView& src,
                const ExecContext& to, const TensorView& dst, int64_t index = -1) {
    check_device(from, op, "src", src);
    check_device(to, op, "dst", dst);
    check_dtype(op, "dst", dst, src.dtype);
    check_contiguous(op, "src", src);
    check_contiguous(op, "dst", dst);
    require(src.numel() == dst.numel(), op, ": sizes differ",
            index >= 0 ? concat(" at ", index) : std::string());
}

} // namespace

void copy(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    check_copy("copy", ctx, src, ctx, dst);
    if (ctx.device.is_cpu()) return convert_host(src, dst, "copy");
    return cuda::copy(ctx, src, dst);
}

void copy_across(const ExecContext& from, const TensorView& src, const ExecContext& to,
                 const TensorView& dst) {
    check_copy("copy_across", from, src, to, dst);
    require(from.device.type == to.device.type,
            "copy_across: between a CPU and a CUDA device use upload or download");
    if (from.device.is_cpu()) return convert_host(src, dst, "copy_across");
    return cuda::copy_across(from, src, to, dst);
}

void enable_peer_access(Device a, Device b) {
    require(a.type == b.type, "enable_peer_access: a CPU and a CUDA device");
    if (!a.is_cpu() && a.index != b.index) cuda::enable_peer_access(a.index, b.index);
}

void stream_wait(const ExecContext& waiter, const ExecContext& producer) {
    require(waiter.device.type == producer.device.type,
            "stream_wait: a CPU and a CUDA context share no stream order");
    if (!waiter.device.is_cpu()) cuda::stream_wait(waiter, producer);
}

void copy_many(const ExecContext& ctx, const std::vector<TensorView>& src,
               const std::vector<TensorView>& dst) {
    require(src.size() == dst.size(), "copy_many: ", src.size(), " sources for ", dst.size(),
            " destinations");
    for (size_t i = 0; i < src.size(); ++i)
        check_copy("copy_many", ctx, src[i], ctx, dst[i], int64_t(i));
    if (ctx.device.is_cpu()) {
        for (size_t i = 0; i < src.size(); ++i) convert_host(src[i], dst[i], "copy_many");
        return;
    }
    cuda::copy_many(ctx, src, dst);
}

void bind_device(const ExecContext& ctx) {
    if (!ctx.device.is_cpu()) cuda::bind_device(ctx);
}

std::shared_ptr<void> create_stream(Device device) {
    if (device.is_cpu()) return nullptr;
    return cuda::create_stream(device);
}

std::unique_ptr<Graph> capture_graph(const ExecContext& ctx, const std::function<void()>& body) {
    require(!ctx.device.is_cpu() && ctx.stream,
            "capture_graph: needs a CUDA context with a stream");
    return cuda::capture_graph(ctx, body);
}

void synchronize(const ExecContext& ctx) {
    if (ctx.device.is_cpu()) return;
    cuda::synchronize(ctx);
}

bool capturing(const ExecContext& ctx) {
    return !ctx.device.is_cpu() && cuda::capturing(ctx);
}

void reset_memory_peak(const ExecContext& ctx) {
    if (!ctx.device.is_cpu()) cuda::reset_memory_peak(ctx);
}

int64_t memory_in_use(const ExecContext& ctx) {
    return ctx.device.is_cpu() ? 0 : cuda::memory_in_use(ctx);
}

int64_t memory_peak(const ExecContext& ctx) {
    return ctx.device.is_cpu() ? 0 : cuda::memory_peak(ctx);
}

DeviceMemory device_memory(const ExecContext& ctx) {
    if (!ctx.device.is_cpu()) return cuda::device_memory(ctx);
    const int64_t page = sysconf(_SC_PAGESIZE);
    return {int64_t(sysconf(_SC_AVPHYS_PAGES)) * page, int64_t(sysconf(_SC_PHYS_PAGES)) * page};
}

void fill_random(const ExecContext& ctx, const TensorView& dst, uint64_t seed, float mean,
                 float stddev) {
    check_device(ctx, "fill_random", "dst", dst);
    check_contiguous("fill_random", "dst", dst);
    require(dst.dtype == DType::F32 || dst.dtype == DType::BF16 || dst.dtype == DType::F8E4M3,
            "fill_random: F32, BF16 or F8E4M3, got ", dst.describe());
    if (!ctx.device.is_cpu()) return cuda::fill_random(ctx, dst, seed, mean, stddev);
    const int64_t n = dst.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = mean + stddev * philox_normal(seed, uint64_t(i));
        if (dst.dtype == DType::F32)
            dst.ptr<float>()[i] = v;
        else if (dst.dtype == DType::BF16)
            dst.ptr<uint16_t>()[i] = float_to_bf16(v);
        else // e4m3 saturates at +-448 like __NV_SATFINITE
            dst.ptr<uint8_t>()[i] = float_to_fp8_e4m3(std::fmax(-448.0f, std::fmin(448.0f, v)));
    }
}

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Seconds of fn() with the device drained before and after.
template <typename Fn> double timed(const ExecContext& ctx, Fn&& fn) {
    synchronize(ctx);
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(ctx);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

double measure_copy_bandwidth(const ExecContext& ctx, int64_t bytes, int reps) {
    Allocator& a = device_allocator(ctx.device);
    Tensor src = Tensor::empty(a, DType::U8, {bytes}), dst = Tensor::empty(a, DType::U8, {bytes});
    std::vector<double> times;
    for (int r = 0; r <= reps; ++r) {
        const double t = timed(ctx, [&] {
            if (ctx.device.is_cpu())
                std::memcpy(dst.view().data, src.view().data, size_t(bytes));
            else
                cuda::copy(ctx, src, dst);
        });
        if (r > 0) times.push_back(t); // the first run warms up
    }
    return 2.0 * double(bytes) / median(times);
}

double measure_gemm_flops(const ExecContext& ctx, int64_t n, int reps) {
    Allocator& a = device_allocator(ctx.device);
    Tensor x = Tensor::empty(a, ctx.dtype, {n, n}), w = Tensor::empty(a, ctx.dtype, {n, n});
    Tensor y = Tensor::empty(a, ctx.dtype, {n, n});
    fill_random(ctx, x, 1, 0.0f, 1.0f); // random data: zeros run faster than real inputs
    fill_random(ctx, w, 2, 0.0f, 1.0f);
    std::vector<double> times;
    for (int r = 0; r <= reps; ++r) {
        const double t = timed(ctx, [&] { linear(ctx, x, w, y); });
        if (r > 0) times.push_back(t);
    }
    return 2.0 * double(n) * double(n) * double(n) / median(times);
}

} // namespace ninfer::ops
