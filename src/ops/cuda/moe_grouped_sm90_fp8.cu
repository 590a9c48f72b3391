// Implements moe_grouped_sm90_fp8.h: CUTLASS 4's sm_90 grouped GEMM with block-wise fp8 scaling
// (a persistent grid, one producer warp issuing TMA loads, two consumer warpgroups on fp8
// wgmma, each 128-deep K block's accumulators promoted to f32 with its activation and weight
// scales), with the groups' shapes, pointers and scale layouts written on the device. Compiled
// for sm_90a alone (src/ops/CMakeLists.txt), beside moe_grouped_sm90.cu; other builds compile
// moe_grouped_sm90_stub.cpp.
//
// Tile 128 x 128 x 128 (the K tile is the scale block: one promotion per tile), cluster 1 x 1,
// as the bf16 kernel: an expert owns ~T * 8 / 256 rows of a prefill chunk.
#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/moe_grouped_sm90_common.cuh"
#include "ops/cuda/moe_grouped_sm90_fp8.h"
#include "ops/memory.h"

namespace ninfer::ops::cuda {
namespace {

using namespace cute;

using Problem = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>; // (M, N, K)
using TileShape = cute::Shape<_128, _128, _128>;
using ClusterShape = cute::Shape<_1, _1, _1>;
using Fp8 = cutlass::float_e4m3_t;
constexpr int kBlock = 128;             // the checkpoints' scale block, both ways
constexpr int kAlignAB = 16;            // e4m3 elements per 16 bytes (TMA)
constexpr int kAlignD = 4;              // f32
// Activation scales per row and 128 columns; weight scales per 128 x 128 block. Sm90 takes both
// scale layouts MN-major only (the row or the n-block fastest).
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, kBlock, kBlock>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor*,
    kAlignD, float, cutlass::layout::RowMajor*, kAlignD,
    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Fp8,
    cute::tuple<cutlass::layout::RowMajor*, LayoutSFA*>, kAlignAB, Fp8,
    cute::tuple<cutlass::layout::ColumnMajor*, LayoutSFB*>, kAlignAB, float, TileShape,
    ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<int(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Problem, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

using StrideA = typename Kernel::InternalStrideA;
using StrideB = typename Kernel::InternalStrideB;
using StrideD = typename Kernel::InternalStrideD;
using Shape3 = typename Problem::UnderlyingProblemShape;

// The per-group arguments CUTLASS reads on the device, in one scratch buffer.
struct GroupArgs {
    Shape3* shape;
    const Fp8** a;
    const Fp8** w;
    const float** sa;
    const float** sw;
    float** d;
    StrideA* stride_a;
    StrideB* stride_b;
    StrideD* stride_d;
    LayoutSFA* layout_sa;
    LayoutSFB* layout_sw;
};

// The group arguments of E groups in `base` (null: only the size, in *bytes).
GroupArgs carve(void* base, int64_t E, size_t* bytes = nullptr) {
    sm90::Carver c{static_cast<char*>(base)};
    const size_t e = size_t(E);
    GroupArgs g;
    g.shape = c.take<Shape3>(e);
    g.a = c.take<const Fp8*>(e);
    g.w = c.take<const Fp8*>(e);
    g.sa = c.take<const float*>(e);
    g.sw = c.take<const float*>(e);
    g.d = c.take<float*>(e);
    g.stride_a = c.take<StrideA>(e);
    g.stride_b = c.take<StrideB>(e);
    g.stride_d = c.take<StrideD>(e);
    g.layout_sa = c.take<LayoutSFA>(e);
    g.layout_sw = c.take<LayoutSFB>(e);
    if (bytes) *bytes = c.used;
    return g;
}

// One thread per expert: its group's shape (M = its rows), operand and scale pointers, packed
// strides and the scale layouts of that shape.
__global__ void write_fp8_groups(GroupArgs g, const Fp8* a, const float* sa, const Fp8* w,
                                 const float* sw, float* d, const int32_t* count,
                                 const int32_t* end, int E, int N, int K) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    const int64_t first = sm90::write_group(g, e, a, w, d, count, end, N, K);
    const int64_t kb = K / kBlock, nb = N / kBlock;
    g.sa[e] = sa + first * kb; // the groups before it hold `first` rows of kb scales each
    g.sw[e] = sw + int64_t(e) * nb * kb;
    const int m = count[e];
    g.layout_sa[e] = ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape(m, N, K, 1));
    g.layout_sw[e] = ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape(m, N, K, 1));
}

} // namespace

bool wgmma_fp8_grouped_built() {
    return true;
}

bool wgmma_fp8_grouped_fits(const ExecContext& ctx, const WgmmaFp8GroupedGemm& g) {
    return sm90::device_and_operands_fit(ctx, g.a, g.w, g.d, g.E, g.N, g.K) &&
           g.K % kBlock == 0 && g.N % kBlock == 0;
}

void wgmma_fp8_grouped_gemm(const ExecContext& ctx, const WgmmaFp8GroupedGemm& g) {
    if (!wgmma_fp8_grouped_fits(ctx, g))
        fail(ErrorCategory::Unsupported, "wgmma fp8 grouped GEMM: needs an sm_90 device outside "
             "portable mode, N and K multiples of 128 and 16-byte aligned operands; got E ", g.E,
             ", N ", g.N, ", K ", g.K);
    cudaStream_t stream = stream_of(ctx);
    size_t args_bytes = 0;
    carve(nullptr, g.E, &args_bytes);
    Tensor args_buf =
        Tensor::empty(device_allocator(ctx.device), DType::U8, {int64_t(args_bytes)});
    const GroupArgs groups = carve(args_buf.view().data, g.E);
    write_fp8_groups<<<unsigned((g.E + 127) / 128), 128, 0, stream>>>(
        groups, static_cast<const Fp8*>(g.a), g.sa, static_cast<const Fp8*>(g.w), g.sw, g.d,
        g.count, g.end, int(g.E), int(g.N), int(g.K));
    check_launch("write_fp8_groups");

    cutlass::KernelHardwareInfo hw;
    hw.device_id = ctx.device.index;
    hw.sm_count = sm_count(ctx);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {int(g.E), groups.shape, nullptr}, // shapes on the device only
        {groups.a, groups.stride_a, groups.w, groups.stride_b, groups.sa, groups.layout_sa,
         groups.sw, groups.layout_sw},
        {{}, nullptr, nullptr, groups.d, groups.stride_d},
        hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    sm90::run_grouped<Gemm>(ctx, args, "wgmma fp8 grouped GEMM", g.E, g.N, g.K);
}

} // namespace ninfer::ops::cuda
