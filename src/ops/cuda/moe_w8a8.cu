// Implements moe_w8a8.h: the quantize and SwiGLU kernels around the two block-scaled fp8 grouped
// GEMMs of moe_experts' W8A8 route.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/moe_grouped_sm90_fp8.h"
#include "ops/cuda/moe_w8a8.h"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kBlock = 128;          // columns per activation scale = the weights' block
constexpr int kWarps = 4;            // per block of the quantize kernels

bool g_scale_sabotage = false;

// The expert whose slots hold slot s: the first e with end[e] > s (ends ascend).
__device__ __forceinline__ int expert_of_slot(const int32_t* end, int E, int32_t s) {
    int lo = 0, hi = E - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (end[mid] > s) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// Lane l's 4 values v (columns [4 l, 4 l + 4) of 128-column block b of slot s's row) quantized
// as quantize_rows_fp8 does (quantize_group4_e4m3); the codes go to codes_row, the scale to the MN-major SFA layout of
// the slot's expert group (moe_grouped_sm90_fp8.h): first * KB + (s - first) + b * M.
__device__ __forceinline__ void quantize_block(const float (&v)[4], uint8_t* codes_row, int64_t b,
                                               float* sa, int64_t KB, int64_t first, int64_t M,
                                               int64_t s) {
    const int lane = threadIdx.x & 31;
    float scale = 0.0f;
    *reinterpret_cast<uint32_t*>(codes_row + b * kBlock + 4 * lane) =
        quantize_group4_e4m3(v, &scale);
    if (lane == 0) sa[first * KB + (s - first) + b * M] = scale;
}

// Block per slot s < *total: the codes and scales of token token_of_slot[s] (quantize_rows_fp8's
// output over x's T rows: codes [T, H], scales [H / 128, T]) copied to slot s: the codes row to
// codes[s] (16-byte chunks, H % 128 == 0), the scales to the MN-major SFA layout of the slot's
// expert group (quantize_block's place). Each token is quantized once, not once per pair.
__global__ void __launch_bounds__(32 * kWarps)
    gather_slot_codes(const uint8_t* token_codes, const float* token_scales, int64_t T,
                      const int32_t* token_of_slot, const int32_t* count, const int32_t* end, int E,
                      int64_t H, uint8_t* codes, float* sa) {
    const int32_t s = blockIdx.x;
    if (s >= end[E - 1]) return;
    const int e = expert_of_slot(end, E, s);
    const int64_t M = count[e], first = end[e] - M, KB = H / kBlock;
    const int64_t t = token_of_slot[s];
    const uint4* src = reinterpret_cast<const uint4*>(token_codes + t * H);
    uint4* dst = reinterpret_cast<uint4*>(codes + int64_t(s) * H);
    for (int64_t c = threadIdx.x; c < H / 16; c += blockDim.x) dst[c] = src[c];
    for (int64_t b = threadIdx.x; b < KB; b += blockDim.x)
        sa[first * KB + (s - first) + b * M] = token_scales[b * T + t];
}

// Block per slot s < *total: act = silu(gate) * up in f32 from gu[s] = [gate | up] (the GEMM's
// bf16 rows, I each), quantized into codes[s] and sa (never rounded to bf16 in between).
__global__ void __launch_bounds__(32 * kWarps)
    swiglu_quantize_slot_rows(const __nv_bfloat16* gu, const int32_t* count, const int32_t* end,
                              int E, int64_t I, uint8_t* codes, float* sa) {
    const int32_t s = blockIdx.x;
    if (s >= end[E - 1]) return;
    const int e = expert_of_slot(end, E, s);
    const int64_t M = count[e], first = end[e] - M, KB = I / kBlock;
    const __nv_bfloat16* row = gu + int64_t(s) * 2 * I;
    const int lane = threadIdx.x & 31;
    for (int64_t b = threadIdx.x >> 5; b < KB; b += kWarps) {
        const int64_t c = b * kBlock + 4 * lane;
        float gv[4], uv[4], v[4];
        bf16x4_to_float(*reinterpret_cast<const uint2*>(row + c), gv);
        bf16x4_to_float(*reinterpret_cast<const uint2*>(row + I + c), uv);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = gv[j] / (1.0f + __expf(-gv[j])) * uv[j];
        quantize_block(v, codes + int64_t(s) * I, b, sa, KB, first, M, s);
    }
}

// t[e, kb, nb] = s[e, nb, kb]: a stack's block scales in the MN-major layout CUTLASS's sm_90
// kernel takes (n-block fastest).
__global__ void transpose_block_scales(const float* s, int64_t E, int64_t NB, int64_t KB,
                                       float* t) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= E * NB * KB) return;
    const int64_t e = i / (NB * KB), nb = (i / KB) % NB, kb = i % KB;
    t[(e * KB + kb) * NB + nb] = s[i];
}

Tensor scratch(const ExecContext& ctx, DType dtype, std::initializer_list<int64_t> dims) {
    return Tensor::empty(allocator(ctx.device), dtype, dims);
}

// The stack's scales transposed (transpose_block_scales) into a new scratch tensor (copied as
// they are under the sabotage hook).
Tensor transposed_scales(const ExecContext& ctx, const WeightView& w) {
    const int64_t E = w.size(0), NB = w.size(1) / kBlock, KB = w.size(2) / kBlock;
    Tensor t = scratch(ctx, DType::F32, {E, KB, NB});
    if (g_scale_sabotage) {
        check(cudaMemcpyAsync(t.view().data, w.scale.data, size_t(E * NB * KB) * sizeof(float),
                              cudaMemcpyDeviceToDevice, stream_of(ctx)),
              "sabotaged scales");
        return t;
    }
    const int64_t n = E * NB * KB;
    transpose_block_scales<<<unsigned((n + 255) / 256), 256, 0, stream_of(ctx)>>>(
        w.scale.ptr<float>(), E, NB, KB, t.ptr<float>());
    check_launch("transpose_block_scales");
    return t;
}

// A packed fp8 stack [E, N, K] of 128 x 128 blocks with F32 scales [E, N / 128, K / 128].
bool stack_fits(const WeightView& w) {
    return w.is_fp8() && w.w.ndim == 3 && w.block_rows == kBlock && w.block_cols == kBlock &&
           w.size(1) % kBlock == 0 && w.size(2) % kBlock == 0 && w.w.is_contiguous() &&
           w.scale.dtype == DType::F32 && w.scale.is_contiguous() && w.scale.ndim == 3 &&
           w.scale.size(1) == w.size(1) / kBlock && w.scale.size(2) == w.size(2) / kBlock;
}

} // namespace

void set_w8a8_scale_sabotage(bool untransposed) {
    g_scale_sabotage = untransposed;
}

bool w8a8_route(const ExecContext& ctx, const WeightView& gate_up, const WeightView& down,
                int64_t pairs) {
    const int kernel = active_route_table().route(RouteId::MoeExpertsFp8, pairs);
    if (!wgmma_fp8_grouped_built() || !stack_fits(gate_up) || !stack_fits(down) ||
        (kernel != kRouteWgmmaW8a8 && kernel != kRouteWgmmaW8a8Swap))
        return false;
    const int64_t E = gate_up.size(0), H = gate_up.size(2), I = down.size(2);
    // a and d are this route's scratch (256-byte aligned): the weights and shapes are in question.
    return down.size(1) == H && gate_up.size(1) == 2 * I &&
           wgmma_fp8_grouped_fits(ctx, {nullptr, nullptr, gate_up.w.data, nullptr, nullptr,
                                        nullptr, nullptr, E, 2 * I, H}) &&
           wgmma_fp8_grouped_fits(ctx, {nullptr, nullptr, down.w.data, nullptr, nullptr, nullptr,
                                        nullptr, E, H, I});
}

void experts_w8a8(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                  const WeightView& down, const int32_t* count, const int32_t* end,
                  const int32_t* token_of_slot, int64_t pairs, const TensorView& out) {
    const int64_t H = x.size(1), E = gate_up.size(0), I = down.size(2);
    require(x.dtype == DType::BF16 && H % kBlock == 0 && x.stride[0] % 4 == 0 &&
                reinterpret_cast<uintptr_t>(x.data) % 8 == 0 && out.dtype == DType::BF16,
            "moe_experts (W8A8): BF16 x with H % 128 == 0 and 8-byte aligned rows and BF16 out, "
            "got ",
            x.describe(), " and ", out.describe());
    cudaStream_t stream = stream_of(ctx);
    const int64_t T = x.size(0);
    const Tensor sw_gu = transposed_scales(ctx, gate_up), sw_dn = transposed_scales(ctx, down);
    Tensor token_codes = scratch(ctx, DType::F8E4M3, {T, H});
    Tensor token_scales = scratch(ctx, DType::F32, {H / kBlock, T});
    Tensor codes_x = scratch(ctx, DType::U8, {pairs, H});
    Tensor sa_x = scratch(ctx, DType::F32, {pairs * (H / kBlock)});
    Tensor gu = scratch(ctx, DType::BF16, {pairs, 2 * I});
    Tensor codes_act = scratch(ctx, DType::U8, {pairs, I});
    Tensor sa_act = scratch(ctx, DType::F32, {pairs * (I / kBlock)});
    quantize_rows_fp8(ctx, x, token_codes.view(), token_scales.view());
    gather_slot_codes<<<unsigned(pairs), 32 * kWarps, 0, stream>>>(
        token_codes.ptr<uint8_t>(), token_scales.ptr<float>(), T, token_of_slot, count, end, int(E),
        H, codes_x.ptr<uint8_t>(), sa_x.ptr<float>());
    check_launch("gather_slot_codes");
    // The table's shape for this many pairs: the swapped GEMM for decode batches.
    const bool swapped =
        active_route_table().route(RouteId::MoeExpertsFp8, pairs) == kRouteWgmmaW8a8Swap;
    wgmma_fp8_grouped_gemm(ctx, {codes_x.view().data, sa_x.ptr<float>(), gate_up.w.data,
                                 sw_gu.ptr<float>(), gu.ptr<__nv_bfloat16>(), count, end, E, 2 * I,
                                 H, swapped});
    swiglu_quantize_slot_rows<<<unsigned(pairs), 32 * kWarps, 0, stream>>>(
        gu.ptr<__nv_bfloat16>(), count, end, int(E), I, codes_act.ptr<uint8_t>(),
        sa_act.ptr<float>());
    check_launch("swiglu_quantize_slot_rows");
    wgmma_fp8_grouped_gemm(ctx, {codes_act.view().data, sa_act.ptr<float>(), down.w.data,
                                 sw_dn.ptr<float>(), out.ptr<__nv_bfloat16>(), count, end, E, H, I,
                                 swapped});
}

} // namespace ninfer::ops::cuda
