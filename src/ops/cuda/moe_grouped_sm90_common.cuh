// What the two CUTLASS grouped-GEMM files (moe_grouped_sm90.cu: bf16; moe_grouped_sm90_fp8.cu:
// block-scaled fp8) share: carving one scratch buffer into their per-group argument arrays, and
// running a configured GemmUniversalAdapter on ctx's stream. Included by those files only.
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/memory.h"

namespace ninfer::ops::cuda::sm90 {

constexpr size_t round16(size_t n) {
    return (n + 15) / 16 * 16;
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
