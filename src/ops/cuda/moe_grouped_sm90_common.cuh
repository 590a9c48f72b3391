// What the two CUTLASS grouped-GEMM files (moe_grouped_sm90.cu: bf16; moe_grouped_sm90_fp8.cu:
// block-scaled fp8) share: the device and operand conditions both need, carving one scratch
// buffer into their per-group argument arrays, writing a group's shape, operand pointers and
// packed strides, and running a configured GemmUniversalAdapter on ctx's stream. Included by
// those files only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/memory.h"

namespace ninfer::ops::cuda::sm90 {

constexpr size_t round16(size_t n) {
    return (n + 15) / 16 * 16;
}

// What both kernels need of the device and the operands: an sm_90 device (device_caps' arch is
// capped to sm_80 in portable mode, so portable runs stay off; Blackwell has no wgmma), sizes
// that fit their int fields, and 16-byte aligned a, w and d (TMA). Each adds its own K and N
// conditions.
inline bool device_and_operands_fit(const ExecContext& ctx, const void* a, const void* w,
                                    const void* d, int64_t E, int64_t N, int64_t K) {
    return !ctx.device.is_cpu() && device_caps(ctx.device.index).arch == 90 && K > 0 && N > 0 &&
           E > 0 && E < (int64_t(1) << 30) && N < (int64_t(1) << 31) &&
           K < (int64_t(1) << 31) && aligned16(a) && aligned16(w) && aligned16(d);
}

// Group e's problem (M, N, K) and operands in a kernel's argument arrays (Groups: shape, a, b, d,
// stride_a, stride_b, stride_d; one thread per group, in a write-groups kernel): A [M, K] and B
// as (N, K), both rows K apart, and D with `ld` elements between its rows (row-major D) or its
// columns (column-major D): kDMode, the mode of CUTLASS's (row, column, batch) StrideD that is
// dynamic. Packed strides with a unit inner stride; M does not enter them, so an empty group
// gets the same.
template <int kDMode, typename Groups, typename TA, typename TB, typename TD>
__device__ __forceinline__ void set_group(Groups& g, int e, int M, int N, int K, const TA* a,
                                          const TB* b, TD* d, int64_t ld) {
    g.shape[e] = std::remove_pointer_t<decltype(g.shape)>{M, N, K};
    g.a[e] = a;
    g.b[e] = b;
    g.d[e] = d;
    std::remove_pointer_t<decltype(g.stride_a)> stride_a{};
    std::remove_pointer_t<decltype(g.stride_b)> stride_b{};
    std::remove_pointer_t<decltype(g.stride_d)> stride_d{};
    cute::get<0>(stride_a) = K;
    cute::get<0>(stride_b) = K;
    cute::get<kDMode>(stride_d) = ld;
    g.stride_a[e] = stride_a;
    g.stride_b[e] = stride_b;
    g.stride_d[e] = stride_d;
}

// Expert e's group over its rows (count[e] of them, ending at end[e]): A its rows of a, B its
// weights w[e] [N, K], D its rows of d, row-major [rows, N]. Returns the group's first row.
template <typename Groups, typename TA, typename TW, typename TD>
__device__ __forceinline__ int64_t write_group(Groups& g, int e, const TA* a, const TW* w, TD* d,
                                               const int32_t* count, const int32_t* end, int N,
                                               int K) {
    const int m = count[e];
    const int64_t first = int64_t(end[e]) - m;
    set_group<0>(g, e, m, N, K, a + first * K, w + int64_t(e) * N * K, d + first * N, N);
    return first;
}

// Successive 16-byte aligned arrays of one buffer (or, with a null base, their total size).
struct Carver {
    char* p;
    size_t used = 0;
    template <typename T> T* take(size_t count) {
        T* here = reinterpret_cast<T*>(p ? p + used : nullptr);
        used += round16(count * sizeof(T));
        return here;
    }
};

// can_implement, a workspace, initialize and run; `what` names the GEMM in errors.
template <typename Gemm>
void run_grouped(const ExecContext& ctx, const typename Gemm::Arguments& args, const char* what,
                 int64_t E, int64_t N, int64_t K) {
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess)
        fail(ErrorCategory::Unsupported, what, ": CUTLASS cannot run E ", E, ", N ", N, ", K ", K);
    Tensor workspace =
        Tensor::empty(device_allocator(ctx.device), DType::U8,
                      {std::max<int64_t>(1, int64_t(Gemm::get_workspace_size(args)))});
    cudaStream_t stream = stream_of(ctx);
    if (gemm.initialize(args, workspace.view().data, stream) != cutlass::Status::kSuccess)
        fail(ErrorCategory::Internal, what, ": CUTLASS initialize failed");
    if (gemm.run(stream) != cutlass::Status::kSuccess)
        fail(ErrorCategory::Internal, what, ": CUTLASS launch failed");
    check_launch(what);
}

} // namespace ninfer::ops::cuda::sm90
