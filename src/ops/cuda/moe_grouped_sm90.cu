// Implements moe_grouped_sm90.h: CUTLASS 3's sm_90 grouped GEMM (KernelPtrArrayTmaWarpSpecialized
// Cooperative: a persistent grid, one producer warp issuing TMA loads into a multi-stage
// shared-memory ring, two consumer warpgroups on wgmma), with the groups' problem shapes only on
// the device. This file is compiled for sm_90a alone (src/ops/CMakeLists.txt); other builds
// compile moe_grouped_sm90_stub.cpp.
//
// Tile 128 x 128 x 64, cluster 1 x 1: an expert owns ~T * 8 / 256 rows of a prefill chunk (256
// at T = 8,192), so taller tiles would idle half their rows at the mid sizes, and a cluster's
// multicast would pair tiles of different experts (different B). D is bf16: the f32 accumulators
// rounded once in the epilogue (half the bytes of f32 rows for the SwiGLU and combine passes).
#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/moe_grouped_sm90_common.cuh"
#include "ops/cuda/moe_grouped_sm90.h"
#include "ops/memory.h"

namespace ninfer::ops::cuda {
namespace {

using namespace cute;

using Problem = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>; // (M, N, K) per group
using TileShape = cute::Shape<_128, _128, _64>;
using ClusterShape = cute::Shape<_1, _1, _1>;
constexpr int kAlignA = 8, kAlignB = 8; // bf16 elements per 16 bytes (TMA)
constexpr int kAlignD = 8;              // bf16 too
using OutT = cutlass::bfloat16_t;
static_assert(sizeof(OutT) == sizeof(__nv_bfloat16), "D is handed over as __nv_bfloat16");

// d = a . w^T: a row-major [M, K]; w [N, K] row-major is B column-major (K x N); d row-major
// [M, N]; no C operand (void), so the epilogue reads nothing.
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor*,
    kAlignD, OutT, cutlass::layout::RowMajor*, kAlignD,
    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::bfloat16_t,
    cutlass::layout::RowMajor*, kAlignA, cutlass::bfloat16_t, cutlass::layout::ColumnMajor*,
    kAlignB, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<int(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Problem, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

using StrideA = typename Kernel::InternalStrideA;
using StrideB = typename Kernel::InternalStrideB;
using StrideD = typename Kernel::InternalStrideD;
using Shape3 = typename Problem::UnderlyingProblemShape;

// The per-group arguments CUTLASS reads on the device, in one scratch buffer.
struct GroupArgs {
    Shape3* shape;
    const cutlass::bfloat16_t** a;
    const cutlass::bfloat16_t** b; // the weights
    OutT** d;
    StrideA* stride_a;
    StrideB* stride_b;
    StrideD* stride_d;
};

// The group arguments of E groups in `base` (null: only the size, in *bytes).
GroupArgs carve(void* base, int64_t E, size_t* bytes = nullptr) {
    sm90::Carver c{static_cast<char*>(base)};
    const size_t e = size_t(E);
    GroupArgs g;
    g.shape = c.take<Shape3>(e);
    g.a = c.take<const cutlass::bfloat16_t*>(e);
    g.b = c.take<const cutlass::bfloat16_t*>(e);
    g.d = c.take<OutT*>(e);
    g.stride_a = c.take<StrideA>(e);
    g.stride_b = c.take<StrideB>(e);
    g.stride_d = c.take<StrideD>(e);
    if (bytes) *bytes = c.used;
    return g;
}

// One thread per expert: its group's shape (M = its rows), operand pointers and packed strides.
__global__ void write_groups(GroupArgs g, const cutlass::bfloat16_t* a,
                             const cutlass::bfloat16_t* w, OutT* d, const int32_t* count,
                             const int32_t* end, int E, int N, int K) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < E) sm90::write_group(g, e, a, w, d, count, end, N, K);
}

} // namespace

bool wgmma_grouped_built() {
    return true;
}

bool wgmma_grouped_fits(const ExecContext& ctx, const WgmmaGroupedGemm& g) {
    return sm90::device_and_operands_fit(ctx, g.a, g.w, g.d, g.E, g.N, g.K) && g.K % 8 == 0 &&
           g.N % 8 == 0;
}

void wgmma_grouped_gemm(const ExecContext& ctx, const WgmmaGroupedGemm& g) {
    if (!wgmma_grouped_fits(ctx, g))
        fail(ErrorCategory::Unsupported,
             "wgmma grouped GEMM: needs an sm_90 device outside "
             "portable mode, K % 8 == 0, N % 8 == 0 and 16-byte aligned operands; got E ",
             g.E, ", N ", g.N, ", K ", g.K);
    cudaStream_t stream = stream_of(ctx);
    size_t args_bytes = 0;
    carve(nullptr, g.E, &args_bytes);
    Tensor args_buf =
        Tensor::empty(device_allocator(ctx.device), DType::U8, {int64_t(args_bytes)});
    const GroupArgs groups = carve(args_buf.view().data, g.E);
    const auto* a = static_cast<const cutlass::bfloat16_t*>(g.a);
    const auto* w = static_cast<const cutlass::bfloat16_t*>(g.w);
    write_groups<<<unsigned((g.E + 127) / 128), 128, 0, stream>>>(
        groups, a, w, reinterpret_cast<OutT*>(g.d), g.count, g.end, int(g.E), int(g.N), int(g.K));
    check_launch("write_groups");

    cutlass::KernelHardwareInfo hw;
    hw.device_id = ctx.device.index;
    hw.sm_count = sm_count(ctx);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {int(g.E), groups.shape, nullptr}, // shapes on the device only
        {const_cast<const cutlass::bfloat16_t**>(groups.a), groups.stride_a,
         const_cast<const cutlass::bfloat16_t**>(groups.b), groups.stride_b},
        {{}, nullptr, nullptr, groups.d, groups.stride_d},
        hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    sm90::run_grouped<Gemm>(ctx, args, "wgmma grouped GEMM", g.E, g.N, g.K);
}

} // namespace ninfer::ops::cuda
