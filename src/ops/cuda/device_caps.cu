// device_caps.h: the per-device capabilities the routes are chosen by, portable mode, and the
// check that the fat binary has an image for the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/device_caps.h"

namespace ninfer::ops::cuda {
namespace {

// Device indices with a cache slot: more GPUs than any one host has.
constexpr int kMaxDevices = 64;

#define NINFER_STRINGIFY2(...) #__VA_ARGS__
#define NINFER_STRINGIFY(...) NINFER_STRINGIFY2(__VA_ARGS__)
#ifdef __CUDA_ARCH_LIST__
constexpr const char* kBuiltArchs = NINFER_STRINGIFY(__CUDA_ARCH_LIST__); // e.g. 800,860,...
#else
constexpr const char* kBuiltArchs = "unknown";
#endif

std::atomic<bool>& portable_flag() {
    static std::atomic<bool> flag{[] {
        const char* env = std::getenv("NINFER_PORTABLE_KERNELS");
        return env && std::strcmp(env, "1") == 0;
    }()};
    return flag;
}

// A kernel of this build: its attributes tell which image (if any) the device runs. Every .cu
// file is compiled for the same architectures, so this one stands for all of them.
__global__ void image_probe_kernel() {}

struct NativeCaps {
    DeviceCaps caps;
    cudaError_t image_status = cudaSuccess; // cudaSuccess: the device has an image
};

int attribute(cudaDeviceAttr attr, int device, const char* what) {
    int value = 0;
    check(cudaDeviceGetAttribute(&value, attr, device), what);
    return value;
}

// The virtual architecture the device's image of image_probe_kernel was compiled for (its
// ptxVersion: 90 for sm_90a SASS, 80 for compute_80 PTX JIT-compiled on an H200), never above the
// device's own; 0 without an image. Function attributes are read on the current device: `device`
// is made current for the call.
int code_arch_of(int device, int arch, cudaError_t& status) {
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaFuncAttributes attr{};
    status = cudaFuncGetAttributes(&attr, image_probe_kernel);
    if (status != cudaSuccess) cudaGetLastError(); // not sticky; require_kernel_image reports it
    check(cudaSetDevice(previous), "cudaSetDevice");
    if (status != cudaSuccess) return 0;
    return std::min(attr.ptxVersion > 0 ? attr.ptxVersion : attr.binaryVersion, arch);
}

NativeCaps query(int device) {
    NativeCaps n;
    DeviceCaps& c = n.caps;
    c.arch = 10 * attribute(cudaDevAttrComputeCapabilityMajor, device, "compute capability") +
             attribute(cudaDevAttrComputeCapabilityMinor, device, "compute capability");
    c.sm_count = attribute(cudaDevAttrMultiProcessorCount, device, "multiProcessorCount");
    c.smem_per_block =
        attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device, "sharedMemPerBlockOptin");
    c.code_arch = code_arch_of(device, c.arch, n.image_status);
    return n;
}

// The device's own capabilities, queried on first use. call_once keeps the later reads lock-free
// (launch_pdl asks at every launch) and retries a query that raised.
const NativeCaps& native_caps(int device) {
    struct Slot {
        std::once_flag once;
        NativeCaps caps;
    };
    static Slot slots[kMaxDevices];
    require(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
    Slot& slot = slots[device];
    std::call_once(slot.once, [&] { slot.caps = query(device); });
    return slot.caps;
}

} // namespace

bool portable_kernels() {
    return portable_flag().load(std::memory_order_relaxed);
}

void set_portable_kernels(bool on) {
    portable_flag().store(on, std::memory_order_relaxed);
}

DeviceCaps device_caps(int device) {
    DeviceCaps caps = native_caps(device).caps;
    if (portable_kernels()) {
        caps.arch = std::min(caps.arch, kPortableArch);
        caps.code_arch = std::min(caps.code_arch, kPortableArch);
        caps.smem_per_block = std::min(caps.smem_per_block, kPortableSmemPerBlock);
    }
    return caps;
}

bool has_sm90_features(int device) {
    return device_caps(device).code_arch >= 90;
}

bool has_block_scaled_fp8_matmul(int device) {
    return device_caps(device).arch / 10 == 9;
}

bool shared_memory_fits(int device, size_t bytes) {
    return int64_t(bytes) <= device_caps(device).smem_per_block;
}

void require_shared_memory(const ExecContext& ctx, size_t bytes, const char* kernel) {
    const int device = ctx.device.index;
    if (shared_memory_fits(device, bytes)) return;
    fail(ErrorCategory::Unsupported, kernel, " needs ", bytes,
         " bytes of shared memory per block; cuda:", device, " gives ",
         device_caps(device).smem_per_block, portable_kernels() ? " (portable mode)" : "",
         ": its route should not have been chosen there");
}

std::string device_name(int device) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    return prop.name;
}

int cuda_runtime_version() {
    int version = 0;
    check(cudaRuntimeGetVersion(&version), "cudaRuntimeGetVersion");
    return version;
}

int sm_count(const ExecContext& ctx) {
    return device_caps(ctx.device.index).sm_count;
}

void require_kernel_image(int device) {
    const NativeCaps& n = native_caps(device);
    if (n.image_status == cudaSuccess) return;
    fail(ErrorCategory::Unsupported, "cuda:", device, " is sm_", n.caps.arch,
         ", and this build of ninfer has no kernels it can run (",
         cudaGetErrorString(n.image_status), "; built for __CUDA_ARCH__ ", kBuiltArchs,
         "): rebuild with the default CMAKE_CUDA_ARCHITECTURES or -DCMAKE_CUDA_ARCHITECTURES=",
         n.caps.arch);
}

} // namespace ninfer::ops::cuda
