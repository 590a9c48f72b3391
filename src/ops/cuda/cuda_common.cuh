// Shared pieces of the CUDA op bodies: error checks, element access for F32/BF16 tensors, row
// views, block reductions and dtype dispatch. Included by .cu files only.
#pragma once

#include <functional>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/stream_release.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

[[noreturn]] void throw_cuda(cudaError_t status, const char* what);

inline void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw_cuda(status, what);
}
// After a launch: raises with the kernel's name when the launch failed.
inline void check_launch(const char* kernel) {
    check(cudaGetLastError(), kernel);
}

inline cudaStream_t stream_of(const ExecContext& ctx) {
    return static_cast<cudaStream_t>(ctx.stream);
}

// Element conversion for the two activation types.
__device__ __forceinline__ float to_float(float v) {
    return v;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) {
    return v;
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// The 8 bf16 of one 16-byte load (uint4) as floats, in memory order. A bf16 is the high half of
// the float it stands for, so each 32-bit word gives two floats by a shift and a mask. Working on
// whole words (not on the uint4's address) also keeps the compiler from splitting a 16-byte
// shared-memory load into four 4-byte ones.
__device__ __forceinline__ void bf16x8_to_float(const uint4& raw, float (&v)[8]) {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        v[2 * j] = __uint_as_float(words[j] << 16);
        v[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
    }
}
// The 4 bf16 of one 8-byte load (uint2) as floats, in memory order.
__device__ __forceinline__ void bf16x4_to_float(const uint2& raw, float (&v)[4]) {
    v[0] = __uint_as_float(raw.x << 16), v[1] = __uint_as_float(raw.x & 0xffff0000u);
    v[2] = __uint_as_float(raw.y << 16), v[3] = __uint_as_float(raw.y & 0xffff0000u);
}
// The inverse: 8 floats rounded to nearest-even bf16, packed in memory order (the lower address
// is the low half of each word) for one 16-byte store.
__device__ __forceinline__ uint4 float_to_bf16x8(const float (&v)[8]) {
    uint32_t words[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
        words[j] = *reinterpret_cast<const uint32_t*>(&pair);
    }
    return make_uint4(words[0], words[1], words[2], words[3]);
}

// A row view as kernels see it: [R, N] or [A, B, N] (row r = (r / B, r % B)), unit last stride.
struct RowView {
    char* data;
    int64_t b;       // rows per leading index (1 for 2-D views)
    int64_t stride0; // elements
    int64_t stride1; // elements
    int64_t elem;    // bytes per element
    template <typename T> __device__ __forceinline__ T* row(int64_t r) const {
        return reinterpret_cast<T*>(data) + (r / b) * stride0 + (r % b) * stride1;
    }
};

inline RowView row_view(const TensorView& t) {
    RowView v{static_cast<char*>(t.data), 1, t.stride[0], 0, dtype_size(t.dtype)};
    if (t.ndim == 3) {
        v.b = t.shape[1];
        v.stride1 = t.stride[1];
    }
    return v;
}
inline int64_t rows_of(const TensorView& t) {
    return t.ndim == 3 ? t.shape[0] * t.shape[1] : t.shape[0];
}
inline int64_t width_of(const TensorView& t) {
    return t.shape[t.ndim - 1];
}

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
template <typename T> __device__ inline T block_sum(T v) {
    __shared__ T partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    T total = lane < warps ? partial[lane] : T(0);
    return warp_sum(total);
}

template <typename T> __device__ inline T block_max(T v) {
    __shared__ T partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    T best = lane < warps ? partial[lane] : partial[0];
    return warp_max(best);
}

// Calls fn(T{}) with T = float or __nv_bfloat16 for the dtype; other dtypes are an error.
template <typename Fn> void dispatch_float(DType dtype, const char* op, Fn&& fn) {
    switch (dtype) {
    case DType::F32:
        fn(float{});
        return;
    case DType::BF16:
        fn(__nv_bfloat16{});
        return;
    default:
        break;
    }
    fail(ErrorCategory::Unsupported, op, ": CUDA kernels take F32 or BF16, got ",
         dtype_name(dtype));
}

inline unsigned blocks_for(int64_t n, int threads) {
    return unsigned((n + threads - 1) / threads);
}

// Whether p is 16-byte aligned: what a kernel's uint4 loads and stores need.
inline bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Programmatic dependent launch (sm_90+): a kernel launched by launch_pdl may start while the
// kernel before it in the stream is still finishing, so the launch latency and the block ramp-up
// between the ~20 small kernels of a decode layer overlap the previous kernel's tail instead of
// adding up (inside CUDA graphs too). The contract that keeps this correct: every kernel launched
// by launch_pdl calls pdl_wait_and_release() as its first statement, before any read, write or
// early return. The wait returns once the previous kernel has completed and its writes are
// visible; the release then lets the next kernel launch, so at most one kernel runs ahead.
// Two reads may precede the wait: weights (written only while a model loads), and, speculatively,
// the output of the kernel two launches back (complete before the previous kernel released this
// one), read from L2 (ld.global.cg: L1 may hold a stale line) and checked after the wait, so a
// wrong early value costs time, never a result (moe_decode.cu's early route).
// Kernels launched with <<<>>> (or by cuBLAS) keep the full stream ordering; a no-op before sm_90
// (launch_pdl asks for no overlap there: pdl_enabled), and without the launch attribute.
__device__ __forceinline__ void pdl_wait_and_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The first statement of a kernel that needs sm_90 (thread-block clusters): its route is chosen
// only where has_sm90_features holds, and the images of older architectures, which cannot run it,
// trap instead of computing a wrong result if it were launched there anyway.
__device__ __forceinline__ void trap_before_sm90() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#endif
}

// Device memory for an op's intermediate results (split-K partials, routing tables), at least
// `bytes`, shared by every op on ctx's stream: stream order (and pdl_wait_and_release, which
// every kernel runs before touching memory) keeps two ops from using it at once. It grows on
// demand (never while a graph is being captured: that is an error, so a shape is run eagerly
// before it is captured, as DecodeGraphs does) and old generations stay allocated, because a
// captured graph may still use them. Unlike a scratch Tensor, it adds no allocation node to a
// captured graph. All generations are freed when a stream from create_stream is destroyed.
void* stream_workspace(const ExecContext& ctx, size_t bytes);


// Streaming multiprocessors of ctx's device (device_caps: queried once per device): grid sizes
// that aim to fill the GPU derive from it, never from one card's count.
int sm_count(const ExecContext& ctx);

// Whether the fused routes (rms_norm_linear's normalising GEMV, gdn_core's one kernel,
// moe_block's two, attention_prep's one) are taken; NINFER_FUSED=0 runs their op compositions
// instead, for an A/B.
// The fused kernels are on unless NINFER_FUSED=0 (all off) or NINFER_FUSED_OFF lists this route
// (comma-separated: rms_norm_linear, gdn_core, attention_prep, moe_block): A/B and bisection.
bool fused_routes_enabled(const char* route);

// Whether launch_pdl asks for programmatic serialisation: ctx's device has sm_90's features
// (has_sm90_features: not in portable mode) and NINFER_PDL is not "0" (the switch exists to
// measure the gain: `NINFER_PDL=0 ninfer bench ...`).
bool pdl_enabled(const ExecContext& ctx);

// Raises Unsupported unless ctx's device gives a block `bytes` of shared memory. Routes ask
// shared_memory_fits before they choose a kernel; this backstop at the launch makes a route that
// did not fail loudly, also on an H200 in portable mode (whose 99 KB cap the hardware would not
// enforce).
void require_shared_memory(const ExecContext& ctx, size_t bytes, const char* kernel);

// The opt-in a kernel needs for over 48 KiB of dynamic shared memory, per device, after
// require_shared_memory.
template <typename... Params>
void opt_in_shared_memory(const ExecContext& ctx, void (*kernel)(Params...), size_t bytes,
                          const char* name) {
    require_shared_memory(ctx, bytes, name);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          name);
}

// kernel<<<grid, block, smem, ctx's stream>>>(args...) as a programmatic dependent launch; see
// pdl_wait_and_release for the contract the kernel must keep. Raises on a launch error.
template <typename... Params, typename... Args>
void launch_pdl(const ExecContext& ctx, void (*kernel)(Params...), dim3 grid, dim3 block,
                size_t smem, Args&&... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream_of(ctx);
    cudaLaunchAttribute attribute[1] = {};
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = pdl_enabled(ctx) ? 1 : 0;
    check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), "launch_pdl");
}

} // namespace ninfer::ops::cuda
