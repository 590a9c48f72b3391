// CUDA memory services: a stream-ordered pooled allocator, copies with dtype conversion on the
// host side, fills, and the random fill used by --random-weights.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/philox.h"

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_caps.h"

namespace ninfer::ops::cuda {

void throw_cuda(cudaError_t status, const char* what) {
    fail(ErrorCategory::Cuda, what, ": ", cudaGetErrorString(status));
}

bool fused_routes_enabled(const char* route) {
    static const bool enabled = [] {
        const char* env = std::getenv("NINFER_FUSED");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    if (!enabled) return false;
    static const char* off = std::getenv("NINFER_FUSED_OFF");
    if (!off) return true;
    // A comma-separated list: the route is off when one item equals it.
    const size_t n = std::strlen(route);
    for (const char* p = off; *p;) {
        const char* end = std::strchr(p, ',');
        const size_t len = end ? size_t(end - p) : std::strlen(p);
        if (len == n && std::strncmp(p, route, n) == 0) return false;
        if (!end) break;
        p = end + 1;
    }
    return true;
}

bool pdl_enabled(const ExecContext& ctx) {
    static const bool switched_on = [] {
        const char* env = std::getenv("NINFER_PDL");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    return switched_on && has_sm90_features(ctx.device.index);
}

namespace {

// The stream device allocations of this thread are ordered on (set by bind_device): the engine's
// own stream, so allocations inside a graph capture become graph allocation nodes.
thread_local cudaStream_t t_alloc_stream = nullptr;

// Allocations come from the device's default memory pool (cudaMallocAsync) with an unlimited
// release threshold, so freed memory is reused without synchronising the device.
class CudaAllocator final : public Allocator {
public:
    explicit CudaAllocator(int index) : index_(index) {
        check(cudaSetDevice(index_), "cudaSetDevice");
        require_kernel_image(index_); // before any work: a device without an image fails here
        cudaMemPool_t pool;
        check(cudaDeviceGetDefaultMemPool(&pool, index_), "cudaDeviceGetDefaultMemPool");
        uint64_t threshold = std::numeric_limits<uint64_t>::max();
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
              "cudaMemPoolSetAttribute");
    }
    Buffer allocate(int64_t bytes) override {
        check(cudaSetDevice(index_), "cudaSetDevice");
        void* p = nullptr;
        const size_t size = size_t(std::max<int64_t>(bytes, 256));
        cudaStream_t stream = t_alloc_stream;
        const cudaError_t status = cudaMallocAsync(&p, size, stream);
        if (status != cudaSuccess) {
            cudaGetLastError();
            fail(ErrorCategory::OutOfMemory, "cuda:", index_, ": allocation of ", bytes,
                 " bytes failed: ", cudaGetErrorString(status));
        }
        // Not zero-filled (unlike CPU allocations): every user writes before reading, and a
        // memset per scratch tensor would add a launch to hot paths.
        return Buffer(p, [stream](void* q) { cudaFreeAsync(q, stream); });
    }
    Device device() const override { return Device::cuda(index_); }

private:
    int index_;
};

// Host-side conversion of n elements between float dtypes (or a plain copy of equal dtypes).
void convert(const void* src, DType from, void* dst, DType to, int64_t n) {
    if (from == to) {
        std::memcpy(dst, src, size_t(n * dtype_size(from)));
        return;
    }
    require(is_float(from) && is_float(to), "cannot convert ", dtype_name(from), " to ",
            dtype_name(to));
    std::vector<float> tmp(static_cast<size_t>(n));
    convert_to_f32(src, from, tmp.data(), n);
    convert_from_f32(tmp.data(), dst, to, n);
}

// One of out_f32 / out_bf16 / out_fp8 is set; fp8 codes saturate at +-448 (no NaN codes).
__global__ void fill_normal_kernel(float* out_f32, __nv_bfloat16* out_bf16, __nv_fp8_e4m3* out_fp8,
                                   int64_t n, uint64_t seed, float mean, float stddev) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const float v = mean + stddev * philox_normal(seed, uint64_t(i));
        if (out_f32)
            out_f32[i] = v;
        else if (out_bf16)
            out_bf16[i] = __float2bfloat16_rn(v);
        else
            out_fp8[i].__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    }
}

// Release hooks of the streams create_stream made, by stream.
struct StreamHooks {
    std::mutex mutex;
    std::map<void*, std::vector<std::function<void()>>> hooks;
};
StreamHooks& stream_hooks() {
    static StreamHooks h;
    return h;
}

void run_release_hooks(void* stream) {
    std::vector<std::function<void()>> hooks;
    {
        StreamHooks& h = stream_hooks();
        std::lock_guard lock(h.mutex);
        auto it = h.hooks.find(stream);
        if (it == h.hooks.end()) return;
        hooks = std::move(it->second);
        h.hooks.erase(it);
    }
    for (auto& release : hooks) release();
}

struct Workspace {
    std::vector<void*> generations; // older ones stay alive: captured graphs may use them
    size_t size = 0;
};
struct Workspaces {
    std::mutex mutex;
    std::map<std::pair<int, void*>, Workspace> spaces;
};
Workspaces& workspaces() {
    static Workspaces w;
    return w;
}

} // namespace

void on_stream_release(void* stream, std::function<void()> release) {
    StreamHooks& h = stream_hooks();
    std::lock_guard lock(h.mutex);
    h.hooks[stream].push_back(std::move(release));
}

void* stream_workspace(const ExecContext& ctx, size_t bytes) {
    Workspaces& all = workspaces();
    std::lock_guard lock(all.mutex);
    const std::pair<int, void*> key{ctx.device.index, ctx.stream};
    const bool fresh = all.spaces.find(key) == all.spaces.end();
    Workspace& w = all.spaces[key];
    if (fresh && ctx.stream)
        on_stream_release(ctx.stream, [key] {
            Workspaces& all = workspaces();
            std::lock_guard lock(all.mutex);
            auto it = all.spaces.find(key);
            if (it == all.spaces.end()) return;
            cudaSetDevice(key.first);
            for (void* p : it->second.generations) cudaFree(p);
            all.spaces.erase(it);
        });
    if (bytes <= w.size) return w.generations.back();
    require(!cuda::capturing(ctx), "stream_workspace: ", bytes,
            " bytes needed while a graph is being captured (run the step once eagerly first)");
    constexpr size_t kGranule = size_t(1) << 20;
    const size_t size = (std::max(bytes, 2 * w.size) + kGranule - 1) / kGranule * kGranule;
    check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, size);
    if (status != cudaSuccess) {
        cudaGetLastError();
        fail(ErrorCategory::OutOfMemory, "cuda:", ctx.device.index, ": workspace of ", size,
             " bytes failed: ", cudaGetErrorString(status));
    }
    w.generations.push_back(p);
    w.size = size;
    return p;
}

Allocator& allocator(Device device) {
    static std::mutex mutex;
    static std::vector<std::unique_ptr<CudaAllocator>> allocators;
    std::lock_guard lock(mutex);
    if (allocators.size() <= size_t(device.index)) allocators.resize(size_t(device.index) + 1);
    auto& a = allocators[size_t(device.index)];
    if (!a) a = std::make_unique<CudaAllocator>(device.index);
    return *a;
}

void upload(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    const int64_t n = src.numel();
    if (n == 0) return;
    std::vector<uint8_t> staged(static_cast<size_t>(n * dtype_size(dst.dtype)));
    convert(src.data, src.dtype, staged.data(), dst.dtype, n);
    check(cudaMemcpyAsync(dst.data, staged.data(), staged.size(), cudaMemcpyHostToDevice,
                          stream_of(ctx)),
          "upload");
}

void download(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    const int64_t n = src.numel();
    if (n == 0) return;
    std::vector<uint8_t> staged(static_cast<size_t>(n * dtype_size(src.dtype)));
    check(cudaMemcpyAsync(staged.data(), src.data, staged.size(), cudaMemcpyDeviceToHost,
                          stream_of(ctx)),
          "download");
    check(cudaStreamSynchronize(stream_of(ctx)), "download sync");
    convert(staged.data(), src.dtype, dst.data, dst.dtype, n);
}

void fill_zero(const ExecContext& ctx, const TensorView& dst) {
    check(cudaMemsetAsync(dst.data, 0, size_t(dst.nbytes()), stream_of(ctx)), "fill_zero");
}

void copy(const ExecContext& ctx, const TensorView& src, const TensorView& dst) {
    check(cudaMemcpyAsync(dst.data, src.data, size_t(src.nbytes()), cudaMemcpyDeviceToDevice,
                          stream_of(ctx)),
          "copy");
}

void copy_across(const ExecContext& from, const TensorView& src, const ExecContext& to,
                 const TensorView& dst) {
    const size_t bytes = size_t(src.nbytes());
    if (from.device.index == to.device.index) {
        check(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, stream_of(from)),
              "copy_across");
        return;
    }
    // Direct over NVLink / PCIe when the devices can reach each other's memory, else CUDA
    // stages it through the host: either way ordered on from's stream.
    check(cudaMemcpyPeerAsync(dst.data, to.device.index, src.data, from.device.index, bytes,
                              stream_of(from)),
          "copy_across");
}

void enable_peer_access(int a, int b) {
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
        int can = 0;
        check(cudaDeviceCanAccessPeer(&can, from, to), "cudaDeviceCanAccessPeer");
        if (!can) continue; // copies between them go through the host
        check(cudaSetDevice(from), "cudaSetDevice");
        const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled)
            cudaGetLastError(); // not sticky: enabled by an earlier engine
        else
            check(status, "cudaDeviceEnablePeerAccess");
    }
    check(cudaSetDevice(previous), "cudaSetDevice");
}

void stream_wait(const ExecContext& waiter, const ExecContext& producer) {
    if (waiter.stream == producer.stream && waiter.device == producer.device) return;
    // One event per call, created on the producer's device (an event is recorded on a stream of
    // its own device) and released once the wait is enqueued: CUDA keeps it until it completes.
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    check(cudaSetDevice(producer.device.index), "cudaSetDevice");
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event, stream_of(producer)), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_of(waiter), event, 0), "cudaStreamWaitEvent");
    check(cudaEventDestroy(event), "cudaEventDestroy");
    check(cudaSetDevice(previous), "cudaSetDevice");
}

namespace {

// copy_many's regions per launch: their pointers and sizes travel as one kernel parameter
// (64 * 24 bytes, well inside the 4 KB parameter space). A GDN state row is ~60 regions.
constexpr int kCopyRegions = 64;
constexpr int kCopyThreads = 256;
constexpr int kCopyBlocksPerRegion = 64; // a 2 MB region: 8 16-byte loads per thread

struct CopyRegions {
    const uint8_t* src[kCopyRegions];
    uint8_t* dst[kCopyRegions];
    int64_t bytes[kCopyRegions];
};

// Grid (blocks per region, regions): region blockIdx.y is copied by its blocks with 16-byte
// loads where both ends are 16-byte aligned, then byte by byte for the tail (or all of it).
__global__ void copy_regions_kernel(CopyRegions r) {
    const int i = blockIdx.y;
    const uint8_t* src = r.src[i];
    uint8_t* dst = r.dst[i];
    const int64_t n = r.bytes[i];
    const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    const bool vec = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0;
    const int64_t words = vec ? n / 16 : 0;
    for (int64_t j = first; j < words; j += stride)
        reinterpret_cast<int4*>(dst)[j] = reinterpret_cast<const int4*>(src)[j];
    for (int64_t j = words * 16 + first; j < n; j += stride) dst[j] = src[j];
}

} // namespace

// One kernel launch per kCopyRegions copies: a per-copy cudaMemcpyAsync costs ~8 us of call
// overhead each (a 35B state row, 60 copies: ~0.5 ms), and cudaMemcpyBatchAsync measured slower
// still on the H200 (0.9 ms a row).
void copy_many(const ExecContext& ctx, const std::vector<TensorView>& src,
               const std::vector<TensorView>& dst) {
    CopyRegions r{};
    int n = 0;
    auto flush = [&] {
        if (n == 0) return;
        copy_regions_kernel<<<dim3(kCopyBlocksPerRegion, unsigned(n)), kCopyThreads, 0,
                              stream_of(ctx)>>>(r);
        check_launch("copy_regions_kernel");
        n = 0;
    };
    for (size_t i = 0; i < src.size(); ++i) {
        if (src[i].nbytes() == 0) continue;
        r.src[n] = static_cast<const uint8_t*>(src[i].data);
        r.dst[n] = static_cast<uint8_t*>(dst[i].data);
        r.bytes[n] = src[i].nbytes();
        if (++n == kCopyRegions) flush();
    }
    flush();
}

void bind_device(const ExecContext& ctx) {
    check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
    t_alloc_stream = stream_of(ctx);
}

std::shared_ptr<void> create_stream(Device device) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    return std::shared_ptr<void>(stream, [](void* s) {
        cudaStreamSynchronize(static_cast<cudaStream_t>(s));
        run_release_hooks(s);
        cudaStreamDestroy(static_cast<cudaStream_t>(s));
    });
}

namespace {

class CudaGraph final : public Graph {
public:
    explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
    ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
    void launch(const ExecContext& ctx) override {
        check(cudaGraphLaunch(exec_, stream_of(ctx)), "cudaGraphLaunch");
    }

private:
    cudaGraphExec_t exec_;
};

} // namespace

std::unique_ptr<Graph> capture_graph(const ExecContext& ctx, const std::function<void()>& body) {
    cudaStream_t stream = stream_of(ctx);
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    try {
        body();
    } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream, &broken);
        if (broken) cudaGraphDestroy(broken);
        throw;
    }
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(status, "cudaGraphInstantiate");
    return std::make_unique<CudaGraph>(exec);
}

void synchronize(const ExecContext& ctx) {
    check(cudaStreamSynchronize(stream_of(ctx)), "synchronize");
}

bool capturing(const ExecContext& ctx) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream_of(ctx), &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
}

namespace {
// The device's default pool once ctx's queued work has finished (what a reading of it then sees
// is settled).
cudaMemPool_t settled_pool(const ExecContext& ctx, const char* what) {
    check(cudaStreamSynchronize(stream_of(ctx)), what);
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, ctx.device.index), "cudaDeviceGetDefaultMemPool");
    return pool;
}
uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr, const char* what) {
    uint64_t value = 0;
    check(cudaMemPoolGetAttribute(pool, attr, &value), what);
    return value;
}
} // namespace

// Freed allocations stay in the default pool (unlimited release threshold): trim it first, so
// `free` counts them as free.
DeviceMemory device_memory(const ExecContext& ctx) {
    check(cudaMemPoolTrimTo(settled_pool(ctx, "device_memory"), 0), "cudaMemPoolTrimTo");
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return {int64_t(free_bytes), int64_t(total_bytes)};
}

// The mark can only be reset to zero; the next allocation raises it to the bytes then in use.
void reset_memory_peak(const ExecContext& ctx) {
    uint64_t zero = 0;
    check(cudaMemPoolSetAttribute(settled_pool(ctx, "reset_memory_peak"),
                                  cudaMemPoolAttrUsedMemHigh, &zero),
          "reset_memory_peak: UsedMemHigh");
}

int64_t memory_in_use(const ExecContext& ctx) {
    return int64_t(pool_attribute(settled_pool(ctx, "memory_in_use"), cudaMemPoolAttrUsedMemCurrent,
                                  "memory_in_use: UsedMemCurrent"));
}

int64_t memory_peak(const ExecContext& ctx) {
    const cudaMemPool_t pool = settled_pool(ctx, "memory_peak");
    const uint64_t high =
        pool_attribute(pool, cudaMemPoolAttrUsedMemHigh, "memory_peak: UsedMemHigh");
    const uint64_t now =
        pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent, "memory_peak: UsedMemCurrent");
    return int64_t(std::max(high, now)); // no allocation since the reset leaves the mark at 0
}

void fill_random(const ExecContext& ctx, const TensorView& dst, uint64_t seed, float mean,
                 float stddev) {
    const int64_t n = dst.numel();
    if (n == 0) return;
    const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 65535));
    fill_normal_kernel<<<blocks, 256, 0, stream_of(ctx)>>>(
        dst.dtype == DType::F32 ? dst.ptr<float>() : nullptr,
        dst.dtype == DType::BF16 ? dst.ptr<__nv_bfloat16>() : nullptr,
        dst.dtype == DType::F8E4M3 ? dst.ptr<__nv_fp8_e4m3>() : nullptr, n, seed, mean, stddev);
    check_launch("fill_normal_kernel");
}

} // namespace ninfer::ops::cuda
