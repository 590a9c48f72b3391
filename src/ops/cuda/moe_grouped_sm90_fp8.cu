// Implements moe_grouped_sm90_fp8.h: CUTLASS 4's sm_90 grouped GEMM with block-wise fp8 scaling
// (a persistent grid, one producer warp issuing TMA loads, two consumer warpgroups on fp8
// wgmma, each 128-deep K block's accumulators promoted to f32 with its activation and weight
// scales), with the groups' shapes, pointers and scale layouts written on the device. Compiled
// for sm_90a alone (src/ops/CMakeLists.txt), beside moe_grouped_sm90.cu; other builds compile
// moe_grouped_sm90_stub.cpp.
//
// Two shapes (Fp8Gemm below): 128 x 128 x 128 tiles over an expert's rows for prefill chunks,
// and the operands swapped with 32-row tiles for the few rows an expert owns in a decode batch.
// The K tile is the scale block: one promotion per tile. Cluster 1 x 1. D is written in bf16: the
// f32 accumulators rounded once in the epilogue (half the bytes of f32 rows for the SwiGLU and
// combine passes that read them).
#include <cuda_runtime.h>

#include <type_traits>

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
using ClusterShape = cute::Shape<_1, _1, _1>;
using Fp8 = cutlass::float_e4m3_t;
using OutT = cutlass::bfloat16_t;
static_assert(sizeof(OutT) == sizeof(__nv_bfloat16), "D is handed over as __nv_bfloat16");
constexpr int kBlock = 128;             // the checkpoints' scale block, both ways
constexpr int kAlignAB = 16;            // e4m3 elements per 16 bytes (TMA)
constexpr int kAlignD = 8;              // bf16 elements per 16 bytes

// The two shapes of one GEMM (moe_grouped_sm90_fp8.h), both K-major A and B:
//   rows (kSwap false): A = the expert's activation rows (M = its row count), B = its weights
//     (N = the weight's rows); tile 128 x 128 x 128, both consumer warpgroups on one tile
//     (cooperative); D row-major [rows, N]. Activation scales per row and 128 columns (SFA
//     granularity 1 x 128), weight scales per 128 x 128 block (SFB 128 x 128).
//   swapped (kSwap true): D^T = W . A^T. A = the weights (M = the weight's rows), B = the
//     activation rows (N = the expert's row count, a few in a decode batch: the 128-row tiles of
//     the rows shape idle there); tile 128 x 32 x 128, one tile per consumer warpgroup, the two
//     alternating (ping-pong: one's epilogue under the other's main loop); D column-major, i.e.
//     row-major [rows, N] as above. SFA 128 x 128 (the weight blocks), SFB 1 x 128 (per row).
// Sm90 takes both scale layouts MN-major only, so the same two scale buffers serve both shapes:
// the weights' [K / 128][N / 128] (n-block fastest) and the rows' [K / 128][rows] (row fastest).
template <bool kSwap> struct Fp8Gemm {
    using TileShape = std::conditional_t<kSwap, cute::Shape<_128, _32, _128>,
                                         cute::Shape<_128, _128, _128>>;
    using ScaleConfig =
        std::conditional_t<kSwap, cutlass::detail::Sm90BlockwiseScaleConfig<kBlock, 1, kBlock>,
                           cutlass::detail::Sm90BlockwiseScaleConfig<1, kBlock, kBlock>>;
    using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
    using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
    using LayoutD =
        std::conditional_t<kSwap, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
    using EpilogueSchedule =
        std::conditional_t<kSwap, cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                           cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
    using KernelSchedule = std::conditional_t<
        kSwap, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>;

    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD,
        OutT, LayoutD*, kAlignD, EpilogueSchedule>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Fp8,
        cute::tuple<cutlass::layout::RowMajor*, LayoutSFA*>, kAlignAB, Fp8,
        cute::tuple<cutlass::layout::ColumnMajor*, LayoutSFB*>, kAlignAB, float, TileShape,
        ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<int(
            sizeof(typename Epilogue::SharedStorage))>,
        KernelSchedule>::CollectiveOp;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<Problem, Mainloop, Epilogue>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
    using Shape3 = typename Problem::UnderlyingProblemShape;

    // The per-group arguments CUTLASS reads on the device, in one scratch buffer.
    struct Groups {
        Shape3* shape;
        const Fp8** a;
        const Fp8** b;
        const float** sfa; // A's scales
        const float** sfb; // B's scales
        OutT** d;
        StrideA* stride_a;
        StrideB* stride_b;
        StrideD* stride_d;
        LayoutSFA* layout_sfa;
        LayoutSFB* layout_sfb;
    };

    // The group arguments of E groups in `base` (null: only the size, in *bytes).
    static Groups carve(void* base, int64_t E, size_t* bytes = nullptr) {
        sm90::Carver c{static_cast<char*>(base)};
        const size_t e = size_t(E);
        Groups g;
        g.shape = c.take<Shape3>(e);
        g.a = c.take<const Fp8*>(e);
        g.b = c.take<const Fp8*>(e);
        g.sfa = c.take<const float*>(e);
        g.sfb = c.take<const float*>(e);
        g.d = c.take<OutT*>(e);
        g.stride_a = c.take<StrideA>(e);
        g.stride_b = c.take<StrideB>(e);
        g.stride_d = c.take<StrideD>(e);
        g.layout_sfa = c.take<LayoutSFA>(e);
        g.layout_sfb = c.take<LayoutSFB>(e);
        if (bytes) *bytes = c.used;
        return g;
    }
};

// One thread per expert e (rows [first, first + m), m = count[e]): its group's shape, operand
// and scale pointers, packed strides and scale layouts. The rows' scales start at first * kb
// (the groups before it hold `first` rows of kb scales each), the weights' at e * nb * kb.
template <bool kSwap>
__global__ void write_fp8_groups(typename Fp8Gemm<kSwap>::Groups g, const Fp8* a, const float* sa,
                                 const Fp8* w, const float* sw, OutT* d, const int32_t* count,
                                 const int32_t* end, int E, int N, int K) {
    using G = Fp8Gemm<kSwap>;
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    const int64_t kb = K / kBlock, nb = N / kBlock;
    const int m = count[e];
    const int64_t first = int64_t(end[e]) - m;
    const float* rows_scales = sa + first * kb;
    const float* weight_scales = sw + int64_t(e) * nb * kb;
    if constexpr (!kSwap) {
        sm90::write_group(g, e, a, w, d, count, end, N, K);
        g.sfa[e] = rows_scales;
        g.sfb[e] = weight_scales;
        g.layout_sfa[e] = G::ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape(m, N, K, 1));
        g.layout_sfb[e] = G::ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape(m, N, K, 1));
    } else {
        // (M, N, K) = (the weight's rows, the expert's rows, K): A the weights, B the rows, D
        // column-major (element (i, j) at j * N + i: row-major [rows, N] as above).
        sm90::set_group<1>(g, e, N, m, K, w + int64_t(e) * N * K, a + first * K, d + first * N,
                           N);
        g.sfa[e] = weight_scales;
        g.sfb[e] = rows_scales;
        g.layout_sfa[e] = G::ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape(N, m, K, 1));
        g.layout_sfb[e] = G::ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape(N, m, K, 1));
    }
}

template <bool kSwap> void run_fp8_grouped(const ExecContext& ctx, const WgmmaFp8GroupedGemm& g) {
    using G = Fp8Gemm<kSwap>;
    cudaStream_t stream = stream_of(ctx);
    size_t args_bytes = 0;
    G::carve(nullptr, g.E, &args_bytes);
    Tensor args_buf =
        Tensor::empty(device_allocator(ctx.device), DType::U8, {int64_t(args_bytes)});
    const typename G::Groups groups = G::carve(args_buf.view().data, g.E);
    write_fp8_groups<kSwap><<<unsigned((g.E + 127) / 128), 128, 0, stream>>>(
        groups, static_cast<const Fp8*>(g.a), g.sa, static_cast<const Fp8*>(g.w), g.sw,
        reinterpret_cast<OutT*>(g.d), g.count, g.end, int(g.E), int(g.N), int(g.K));
    check_launch("write_fp8_groups");

    cutlass::KernelHardwareInfo hw;
    hw.device_id = ctx.device.index;
    hw.sm_count = sm_count(ctx);
    typename G::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {int(g.E), groups.shape, nullptr}, // shapes on the device only
        {groups.a, groups.stride_a, groups.b, groups.stride_b, groups.sfa, groups.layout_sfa,
         groups.sfb, groups.layout_sfb},
        {{}, nullptr, nullptr, groups.d, groups.stride_d},
        hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    sm90::run_grouped<typename G::Gemm>(
        ctx, args, kSwap ? "wgmma fp8 grouped GEMM (swapped)" : "wgmma fp8 grouped GEMM", g.E,
        g.N, g.K);
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
    if (g.swapped) run_fp8_grouped<true>(ctx, g);
    else run_fp8_grouped<false>(ctx, g);
}

} // namespace ninfer::ops::cuda
