// What route selection knows about a CUDA device (device_caps.cu). The build is one fat binary
// (cmake/cuda_architectures.cmake: sm_80 .. sm_120), so a route that needs more than every one of
// those GPUs has (sm_90's thread-block clusters and programmatic dependent launch, cuBLASLt's
// Hopper-only block-scaled fp8 matmul, more than 99 KB of shared memory per block) is chosen at run
// time from these answers, and the portable route runs elsewhere. Host API, no CUDA headers: the
// tests include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ninfer::ops::cuda {

struct DeviceCaps {
    int arch = 0;               // compute capability as major * 10 + minor: 80 A100, 90 H200
    int code_arch = 0;          // __CUDA_ARCH__ / 10 of the image of this build the device runs
    int sm_count = 0;           // streaming multiprocessors
    int64_t smem_per_block = 0; // shared memory one block may opt in to (static + dynamic)
};
// code_arch is the virtual architecture the device's image was compiled for: arch itself from
// SASS (90 from sm_90a on an H200), lower where the driver JIT-compiles older PTX (80 for an H200
// running a -DCMAKE_CUDA_ARCHITECTURES=80-virtual build), 0 when the build has no image for the
// device. A route that needs sm_90 in its kernels asks code_arch, so such a build takes the
// portable routes by itself; cuBLASLt's kernels are not ours: those ask arch.

// What portable mode makes every device look like: the least capable GPU of the fat binary, so an
// H200 runs every fallback the other GPUs take. sm_80's features (no clusters, no PDL, no
// block-scaled fp8 in cuBLASLt) and the 99 KB per block of sm_86, sm_89 and sm_120.
inline constexpr int kPortableArch = 80;
inline constexpr int64_t kPortableSmemPerBlock = 99 * 1024;

// Portable mode: NINFER_PORTABLE_KERNELS=1 in the environment (read once), or
// set_portable_kernels (the tests); it holds for the whole process. A route's choice is made
// again at each call, so set it before any work you want on the portable routes (a CUDA graph
// captured before keeps the kernels it captured).
bool portable_kernels();
void set_portable_kernels(bool on);

// The capabilities of CUDA device `device` as the routes see them: queried once per device and
// cached (devices of different generations in one process each get their own), then capped to
// kPortableArch (arch and code_arch) / kPortableSmemPerBlock in portable mode. sm_count is never
// capped.
DeviceCaps device_caps(int device);

// sm_90's thread-block clusters and programmatic dependent launch (griddepcontrol) in our
// kernels: code_arch 90 and later (Blackwell has both).
bool has_sm90_features(int device);
// cuBLASLt's fp8 matmul with 128 x 128 block scales (BLK128x128_32F / VEC128_32F): cuBLAS 12.9
// runs it on sm_90 only (Blackwell's block-scaled fp8 is MXFP8, another format).
bool has_block_scaled_fp8_matmul(int device);
// Whether a kernel may use `bytes` of shared memory per block on the device.
bool shared_memory_fits(int device, size_t bytes);

// The device's name (cudaDeviceProp::name, e.g. "NVIDIA H200") and the CUDA runtime's version
// (cudaRuntimeGetVersion, e.g. 13000): with sm_count, the key of a route table (ops/route_table.h).
std::string device_name(int device);
int cuda_runtime_version();

// Raises Unsupported when this build has no kernel image the device can run (an architecture
// the fat binary does not cover, e.g. sm_110, or a build for other -DCMAKE_CUDA_ARCHITECTURES):
// the allocator asks once per device, before its first allocation, so no launch fails for that
// reason later.
void require_kernel_image(int device);

} // namespace ninfer::ops::cuda
