// Implements moe_route and moe_experts (ops/moe.h) on CUDA.
// moe_route: one warp per token; softmax in f32, top-k by repeated warp argmax (ties: lower id).
// moe_experts, two routes by the number of (token, expert) pairs P = T * k:
//   P <= kGemvMaxPairs (decode) and H, I multiples of 8: warp-per-output GEMV kernels with
//     16-byte loads read each selected expert's rows once per pair; f32 intermediates; a
//     deterministic combine adds the k weighted outputs.
//   larger P (prefill), and block-wise fp8 experts at any P (moe_experts_fp8): the pairs are put
//     in expert order on the device (counts, one-block scan, atomic slot cursors, a tile table of (expert, first slot, rows) M-tiles), then two
//     grouped GEMMs over the tiles (moe_grouped.h): gate_up with SwiGLU fused in its epilogue
//     and A rows gathered from x, down into f32, and the same deterministic combine. bf16 with
//     16-byte aligned rows takes tensor cores (moe_grouped.cu); other cases (F32) a CUDA-core
//     kernel. bf16 stacks take CUTLASS's wgmma grouped GEMM instead where route decision
//     moe_experts.bf16 gives it the pairs (moe_grouped_sm90.h), and block-wise fp8 stacks its
//     W8A8 block-scaled one where moe_experts.fp8 does (moe_w8a8.h). No route synchronises with
//     the host: all are graph-capturable.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/moe_grouped.h"
#include "ops/cuda/moe_grouped_sm90.h"
#include "ops/cuda/moe_route.cuh"
#include "ops/cuda/moe_w8a8.h"
#include "ops/memory.h"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxExpertsPerLane = 16; // E <= 512
constexpr int64_t kGemvMaxPairs = 64;

// One warp per token (route_warp), 4 warps per block.
__global__ void route_kernel(const float* logits, int64_t l_s0, int E, int top_k, float* weights,
                             int64_t w_s0, int32_t* ids, int64_t i_s0, int64_t T, int first,
                             int held) {
    const int64_t t = blockIdx.x * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (t >= T) return;
    const WarpRoute r = route_warp<kMaxExpertsPerLane>(logits + t * l_s0, E, top_k);
    store_route(r, top_k, weights + t * w_s0, ids + t * i_s0, first, held);
}

// Loads 8 consecutive elements as floats (one 16-byte load for bf16, two for f32).
template <typename T> __device__ __forceinline__ void load8(const T* p, float (&v)[8]);
template <>
__device__ __forceinline__ void load8<__nv_bfloat16>(const __nv_bfloat16* p, float (&v)[8]) {
    bf16x8_to_float(*reinterpret_cast<const uint4*>(p), v);
}
template <> __device__ __forceinline__ void load8<float>(const float* p, float (&v)[8]) {
    const float4 a = *reinterpret_cast<const float4*>(p),
                 b = *reinterpret_cast<const float4*>(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Warp dot products of one vector with two rows (n % 8 == 0, 16-byte aligned rows): each lane
// takes 8 consecutive elements per step, so a warp reads 512 bytes of bf16 per instruction.
template <typename TA, typename TB>
__device__ __forceinline__ float2 warp_dot2(const TA* a, const TB* r0, const TB* r1, int64_t n) {
    const int lane = threadIdx.x & 31;
    float s0 = 0.0f, s1 = 0.0f;
    for (int64_t c = int64_t(lane) * 8; c < n; c += 32 * 8) {
        float av[8], v0[8], v1[8];
        load8(a + c, av);
        load8(r0 + c, v0);
        if (r1) load8(r1 + c, v1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            s0 += av[j] * v0[j];
            if (r1) s1 += av[j] * v1[j];
        }
    }
    return make_float2(warp_sum(s0), warp_sum(s1));
}

// act[p, i] = silu(G_e x) * (U_e x) for pair p = (t, j), e = ids[t, j] (0 for e = -1, another
// rank's expert); one warp per (p, i). Assumes H % 8 == 0 (checked by the launcher).
template <typename T>
__global__ void expert_up_gemv(const T* x, int64_t x_s0, const T* gate_up, const int32_t* ids,
                               int64_t i_s0, int k, int64_t I, int64_t H, float* act) {
    const int64_t pair = blockIdx.x;
    const int64_t i = blockIdx.y * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (i >= I) return;
    const int64_t t = pair / k;
    const int e = ids[t * i_s0 + pair % k];
    if (e < 0) { // warp-uniform
        if ((threadIdx.x & 31) == 0) act[pair * I + i] = 0.0f;
        return;
    }
    const T* g = gate_up + (int64_t(e) * 2 * I + i) * H;
    const float2 gu = warp_dot2(x + t * x_s0, g, g + I * H, H);
    if ((threadIdx.x & 31) == 0) act[pair * I + i] = gu.x / (1.0f + __expf(-gu.x)) * gu.y;
}

// out[p, c] = down_e[c, :] . act[p, :] (0 for e = -1); one warp per (p, c). Assumes I % 8 == 0.
template <typename T>
__global__ void expert_down_gemv(const float* act, const T* down, const int32_t* ids, int64_t i_s0,
                                 int k, int64_t I, int64_t H, float* out) {
    const int64_t pair = blockIdx.x;
    const int64_t c = blockIdx.y * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (c >= H) return;
    const int e = ids[(pair / k) * i_s0 + pair % k];
    if (e < 0) { // warp-uniform
        if ((threadIdx.x & 31) == 0) out[pair * H + c] = 0.0f;
        return;
    }
    const float2 d = warp_dot2<float, T>(act + pair * I, down + (int64_t(e) * H + c) * I,
                                         static_cast<const T*>(nullptr), I);
    if ((threadIdx.x & 31) == 0) out[pair * H + c] = d.x;
}

// y[t, c] += sum_j w[t, j] * out[slot(t, j), c], slot = t * k + j or its sorted position (-1:
// another rank's expert, skipped); out f32, or bf16 (the CUTLASS routes' GEMM rows); f32 sum.
template <typename T, typename O>
__global__ void combine_kernel(const O* out, const int32_t* slot_of_pair, const float* w,
                               int64_t w_s0, int k, int64_t H, T* y, int64_t y_s0) {
    const int64_t t = blockIdx.x;
    for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) {
            const int64_t pair = t * k + j;
            const int64_t slot = slot_of_pair ? slot_of_pair[pair] : pair;
            if (slot >= 0) sum += w[t * w_s0 + j] * to_float(out[slot * H + c]);
        }
        y[t * y_s0 + c] = from_float<T>(to_float(y[t * y_s0 + c]) + sum);
    }
}

// combine_kernel for bf16 rows into a bf16 y, 8 columns a thread (16-byte loads and stores; H %
// 8 == 0, 16-byte aligned y rows): the same sums in the same order, so the same bits.
__global__ void combine_bf16x8_kernel(const __nv_bfloat16* out, const int32_t* slot_of_pair,
                                      const float* w, int64_t w_s0, int k, int64_t H,
                                      __nv_bfloat16* y, int64_t y_s0) {
    const int64_t t = blockIdx.x;
    for (int64_t c = 8 * int64_t(threadIdx.x); c < H; c += 8 * int64_t(blockDim.x)) {
        float sum[8] = {};
        for (int j = 0; j < k; ++j) {
            const int64_t slot = slot_of_pair[t * k + j];
            if (slot < 0) continue;
            const float wj = w[t * w_s0 + j];
            float v[8];
            load8(out + slot * H + c, v);
#pragma unroll
            for (int i = 0; i < 8; ++i) sum[i] += wj * v[i];
        }
        uint4* yp = reinterpret_cast<uint4*>(y + t * y_s0 + c);
        float yv[8];
        bf16x8_to_float(*yp, yv);
#pragma unroll
        for (int i = 0; i < 8; ++i) yv[i] += sum[i];
        *yp = float_to_bf16x8(yv);
    }
}

Tensor scratch(const ExecContext& ctx, DType dtype, std::initializer_list<int64_t> dims) {
    return Tensor::empty(allocator(ctx.device), dtype, dims);
}

template <typename T>
void experts_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                  const TensorView& down, const TensorView& ids, const TensorView& weights,
                  const TensorView& y) {
    const int64_t T_ = x.size(0), H = x.size(1), I = down.size(2);
    const int k = int(ids.size(1));
    const int64_t pairs = T_ * k;
    Tensor act = scratch(ctx, DType::F32, {pairs, I});
    Tensor out = scratch(ctx, DType::F32, {pairs, H});
    constexpr int kWarpsPerBlock = 8;
    expert_up_gemv<T><<<dim3(unsigned(pairs), blocks_for(I, kWarpsPerBlock)), 32 * kWarpsPerBlock,
                        0, stream_of(ctx)>>>(x.ptr<T>(), x.stride[0], gate_up.ptr<T>(),
                                             ids.ptr<int32_t>(), ids.stride[0], k, I, H,
                                             act.ptr<float>());
    check_launch("expert_up_gemv");
    expert_down_gemv<T><<<dim3(unsigned(pairs), blocks_for(H, kWarpsPerBlock)), 32 * kWarpsPerBlock,
                          0, stream_of(ctx)>>>(act.ptr<float>(), down.ptr<T>(), ids.ptr<int32_t>(),
                                               ids.stride[0], k, I, H, out.ptr<float>());
    check_launch("expert_down_gemv");
    combine_kernel<T><<<unsigned(T_), 256, 0, stream_of(ctx)>>>(
        out.ptr<float>(), nullptr, weights.ptr<float>(), weights.stride[0], k, H, y.ptr<T>(),
        y.stride[0]);
    check_launch("combine_kernel");
}

// used[ids[t, j]] = 1 for every held pair (used zeroed before; racing writes store the same
// value).
__global__ void mark_used_kernel(const int32_t* ids, int64_t i_s0, int k, int64_t pairs,
                                 int32_t* used) {
    const int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const int e = ids[(p / k) * i_s0 + p % k];
    if (e >= 0) used[e] = 1;
}

// ---- Grouped route: device-side routing (no host synchronisation, graph-capturable) ----

// counts[e] = number of pairs routed to expert e (counts zeroed before; -1 ids skipped).
__global__ void count_pairs(const int32_t* ids, int64_t i_s0, int k, int64_t pairs,
                            int32_t* counts) {
    const int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const int e = ids[(p / k) * i_s0 + p % k];
    if (e >= 0) atomicAdd(&counts[e], 1);
}

// Exclusive prefix sum of v over the block (blockDim.x == 1024); total = the block's sum.
__device__ int block_exclusive_scan(int v, int& total) {
    __shared__ int warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int other = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += other;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int s = warp_sums[lane];
        for (int o = 1; o < 32; o <<= 1) {
            const int other = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += other;
        }
        warp_sums[lane] = s; // inclusive over warps
    }
    __syncthreads();
    const int result = (warp ? warp_sums[warp - 1] : 0) + incl - v;
    total = warp_sums[31];
    __syncthreads(); // warp_sums is reused by the next call
    return result;
}

// One block of 1024 threads; thread i owns experts [i * per, (i + 1) * per). Writes cursor[e]
// = first slot of expert e, the M-tiles of bm rows (tiles: [*, 4] = expert, first slot, rows,
// 0) in expert order, and *num_tiles.
__global__ void plan_tiles(const int32_t* counts, int E, int bm, int32_t* cursor, int32_t* tiles,
                           int32_t* num_tiles) {
    const int per = (E + 1023) / 1024;
    const int e0 = min(E, int(threadIdx.x) * per), e1 = min(E, e0 + per);
    int rows = 0, n_tiles = 0;
    for (int e = e0; e < e1; ++e) rows += counts[e], n_tiles += (counts[e] + bm - 1) / bm;
    int total_rows = 0, total_tiles = 0;
    int slot = block_exclusive_scan(rows, total_rows);
    int tile = block_exclusive_scan(n_tiles, total_tiles);
    for (int e = e0; e < e1; ++e) {
        cursor[e] = slot;
        for (int r = 0; r < counts[e]; r += bm, ++tile)
            reinterpret_cast<int4*>(tiles)[tile] =
                make_int4(e, slot + r, min(bm, counts[e] - r), 0);
        slot += counts[e];
    }
    if (threadIdx.x == 0) *num_tiles = total_tiles;
}

// Gives pair p a slot of its expert (-1 for another rank's). The order within an expert depends
// on the atomics, but a GEMM row's result does not depend on its slot, so the output stays
// bit-deterministic. Slots past the held pairs are never planned into a tile.
__global__ void assign_slots(const int32_t* ids, int64_t i_s0, int k, int64_t pairs,
                             int32_t* cursor, int32_t* token_of_slot, int32_t* slot_of_pair) {
    const int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const int e = ids[(p / k) * i_s0 + p % k];
    if (e < 0) {
        slot_of_pair[p] = -1;
        return;
    }
    const int32_t slot = atomicAdd(&cursor[e], 1);
    token_of_slot[slot] = int32_t(p / k);
    slot_of_pair[p] = slot;
}

// ---- The wgmma route (moe_grouped_sm90.h): its A operand needs the rows packed in slot order ----

// sorted[s, :] = x[token_of_slot[s], :] for the slots s < *total (the held pairs); one block per
// slot, 16-byte chunks (H % 8 == 0, 16-byte aligned rows).
__global__ void gather_slot_rows(const __nv_bfloat16* x, int64_t x_s0,
                                 const int32_t* token_of_slot, const int32_t* total, int64_t H,
                                 __nv_bfloat16* sorted) {
    const int64_t s = blockIdx.x;
    if (s >= *total) return;
    const uint4* src = reinterpret_cast<const uint4*>(x + int64_t(token_of_slot[s]) * x_s0);
    uint4* dst = reinterpret_cast<uint4*>(sorted + s * H);
    for (int64_t c = threadIdx.x; c < H / 8; c += blockDim.x) dst[c] = src[c];
}

// act[s, i] = bf16(silu(gu[s, i]) * gu[s, I + i]) for s < *total (the GEMM's bf16 gate and up,
// f32 arithmetic, one rounding), after the GEMM.
__global__ void swiglu_slot_rows(const __nv_bfloat16* gu, const int32_t* total, int64_t I,
                                 __nv_bfloat16* act) {
    const int64_t s = blockIdx.x;
    if (s >= *total) return;
    const __nv_bfloat16* row = gu + s * 2 * I;
    for (int64_t i = threadIdx.x; i < I; i += blockDim.x) {
        const float g = __bfloat162float(row[i]);
        act[s * I + i] =
            __float2bfloat16_rn(g / (1.0f + __expf(-g)) * __bfloat162float(row[I + i]));
    }
}

// The grouped GEMMs on wgmma: act = SwiGLU(sorted x . gate_up^T), out = act . down^T (both GEMMs'
// outputs bf16).
// count/end: the experts' pair counts and slot ends; the total is the last expert's end.
void experts_wgmma(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                   const WeightView& down, const int32_t* count, const int32_t* end,
                   const int32_t* token_of_slot, int64_t pairs, const TensorView& act,
                   const TensorView& out) {
    const int64_t H = x.size(1), E = gate_up.size(0), I = down.size(2);
    const int32_t* total = end + E - 1;
    cudaStream_t stream = stream_of(ctx);
    Tensor sorted = scratch(ctx, DType::BF16, {pairs, H});
    Tensor gu = scratch(ctx, DType::BF16, {pairs, 2 * I});
    gather_slot_rows<<<unsigned(pairs), 128, 0, stream>>>(
        x.ptr<__nv_bfloat16>(), x.stride[0], token_of_slot, total, H,
        sorted.ptr<__nv_bfloat16>());
    check_launch("gather_slot_rows");
    wgmma_grouped_gemm(ctx, {sorted.view().data, gate_up.w.data, gu.ptr<__nv_bfloat16>(), count,
                             end, E, 2 * I, H});
    swiglu_slot_rows<<<unsigned(pairs), 256, 0, stream>>>(gu.ptr<__nv_bfloat16>(), total, I,
                                                          act.ptr<__nv_bfloat16>());
    check_launch("swiglu_slot_rows");
    wgmma_grouped_gemm(ctx, {act.data, down.w.data, out.ptr<__nv_bfloat16>(), count, end, E, H, I});
}

// Whether the wgmma route takes these bf16 stacks: the route table gives it `pairs`, and the
// kernel takes both GEMMs' shapes on ctx's device (packed [E, N, K] stacks).
bool wgmma_route(const ExecContext& ctx, const WeightView& gate_up, const WeightView& down,
                 int64_t pairs) {
    if (gate_up.is_fp8() || !wgmma_grouped_built() ||
        active_route_table().route(RouteId::MoeExpertsBf16, pairs) != kRouteWgmma)
        return false;
    const int64_t E = gate_up.size(0), H = gate_up.size(2), I = down.size(2);
    const bool packed = gate_up.w.is_contiguous() && down.w.is_contiguous();
    // The operands a and d are this route's scratch (allocated 256-byte aligned): the weights'
    // alignment and the shapes are what is in question.
    return packed &&
           wgmma_grouped_fits(ctx, {nullptr, gate_up.w.data, nullptr, nullptr, nullptr, E, 2 * I, H}) &&
           wgmma_grouped_fits(ctx, {nullptr, down.w.data, nullptr, nullptr, nullptr, E, H, I});
}

// Whether the grouped tensor-core GEMMs take these operands (given bf16 activations): H and I
// multiples of 8, 16-byte aligned rows, and dense stacks aligned or fp8 stacks they take.
bool grouped_operands_fit(const TensorView& x, const WeightView& gate_up, const WeightView& down) {
    const int64_t H = x.size(1), I = down.size(2);
    const bool fp8 = gate_up.is_fp8();
    return H % 8 == 0 && I % 8 == 0 && x.stride[0] % 8 == 0 && aligned16(x.data) &&
           (fp8 ? grouped_fp8_fits(gate_up) && grouped_fp8_fits(down)
                : aligned16(gate_up.w.data) && aligned16(down.w.data));
}

// The grouped GEMMs over the tile table (moe_grouped.h): tensor cores (mma.sync) or CUDA cores.
void experts_tiles(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                   const WeightView& down, const int32_t* token_of_slot, const Tensor& tiles,
                   const int32_t* num_tiles, int64_t max_tiles, int bm, bool tensor_cores,
                   const TensorView& act, const TensorView& out) {
    const int64_t H = x.size(1), I = down.size(2);
    GroupedGemm up{x.data,    x.stride[0], token_of_slot,        gate_up.w.data, 2 * I * H, H, I,
                   tiles.ptr<int32_t>(), num_tiles, max_tiles, act.data, I};
    GroupedGemm dn{act.data,             I,         nullptr,   down.w.data, H * I, I, H,
                   tiles.ptr<int32_t>(), num_tiles, max_tiles, out.data,    H};
    if (gate_up.is_fp8()) set_fp8_weight(up, gate_up), set_fp8_weight(dn, down);
    if (tensor_cores) {
        grouped_gate_up_bf16(ctx, up, bm);
        grouped_down_bf16(ctx, dn, bm);
    } else {
        grouped_gemm_cuda_cores(ctx, up, x.dtype, true);
        grouped_gemm_cuda_cores(ctx, dn, x.dtype, false);
    }
}

// Pairs in expert order (token_of_slot, slot_of_pair, tile table) on the device, then
// act = SwiGLU(gate_up GEMM), out = down GEMM (f32), and the deterministic combine into y.
// Weights: dense stacks, or both block-wise fp8 (moe_experts_fp8: tensor cores only).
template <typename T>
void experts_grouped(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                     const WeightView& down, const TensorView& ids, const TensorView& weights,
                     const TensorView& y) {
    const int64_t T_ = x.size(0), H = x.size(1), E = gate_up.size(0), I = down.size(2);
    const int k = int(ids.size(1));
    const int64_t pairs = T_ * k;
    require(pairs < (int64_t(1) << 31), "moe_experts: too many (token, expert) pairs");
    const bool fp8 = gate_up.is_fp8();
    const bool tensor_cores =
        std::is_same_v<T, __nv_bfloat16> && grouped_operands_fit(x, gate_up, down);
    require(tensor_cores || !fp8, "moe_experts: fp8 experts need the tensor-core route");
    const bool wgmma = tensor_cores && wgmma_route(ctx, gate_up, down, pairs);
    const bool w8a8 = tensor_cores && fp8 && w8a8_route(ctx, gate_up, down, pairs);
    const int bm = !tensor_cores ? kGroupedSimpleRows
                   : fp8         ? grouped_tile_rows_fp8(pairs, E)
                                 : grouped_tile_rows_bf16(ctx, pairs, E);
    // sum_e ceil(count_e / bm) <= floor(pairs / bm) + E.
    const int64_t max_tiles = pairs / bm + E;
    cudaStream_t stream = stream_of(ctx);

    Tensor route = scratch(ctx, DType::I32, {2 * E + 1}); // counts | cursor | num_tiles
    Tensor tiles = scratch(ctx, DType::I32, {max_tiles, 4});
    Tensor token_of_slot = scratch(ctx, DType::I32, {pairs}),
           slot_of_pair = scratch(ctx, DType::I32, {pairs});
    int32_t* counts = route.ptr<int32_t>();
    int32_t *cursor = counts + E, *num_tiles = counts + 2 * E;
    check(cudaMemsetAsync(counts, 0, size_t(E) * sizeof(int32_t), stream), "moe counts");
    const unsigned pair_blocks = unsigned((pairs + 255) / 256);
    count_pairs<<<pair_blocks, 256, 0, stream>>>(ids.ptr<int32_t>(), ids.stride[0], k, pairs,
                                                 counts);
    check_launch("count_pairs");
    plan_tiles<<<1, 1024, 0, stream>>>(counts, int(E), bm, cursor, tiles.ptr<int32_t>(), num_tiles);
    check_launch("plan_tiles");
    assign_slots<<<pair_blocks, 256, 0, stream>>>(ids.ptr<int32_t>(), ids.stride[0], k, pairs,
                                                  cursor, token_of_slot.ptr<int32_t>(),
                                                  slot_of_pair.ptr<int32_t>());
    check_launch("assign_slots");

    // The CUTLASS routes write bf16 rows; the mma.sync and CUDA-core tiles f32.
    const bool bf16_rows = wgmma || w8a8;
    Tensor out = scratch(ctx, bf16_rows ? DType::BF16 : DType::F32, {pairs, H});
    Tensor act = w8a8 ? Tensor() : scratch(ctx, x.dtype, {pairs, I});
    if (wgmma)
        experts_wgmma(ctx, x, gate_up, down, counts, cursor, token_of_slot.ptr<int32_t>(), pairs,
                      act.view(), out.view());
    else if (w8a8)
        experts_w8a8(ctx, x, gate_up, down, counts, cursor, token_of_slot.ptr<int32_t>(), pairs,
                     out.view());
    else
        experts_tiles(ctx, x, gate_up, down, token_of_slot.ptr<int32_t>(), tiles, num_tiles,
                      max_tiles, bm, tensor_cores, act.view(), out.view());
    const auto combine = [&](auto* rows) {
        combine_kernel<<<unsigned(T_), 256, 0, stream>>>(rows, slot_of_pair.ptr<int32_t>(),
                                                         weights.ptr<float>(), weights.stride[0], k,
                                                         H, y.ptr<T>(), y.stride[0]);
        check_launch("combine_kernel");
    };
    const bool vector_y =
        std::is_same_v<T, __nv_bfloat16> && y.stride[0] % 8 == 0 && aligned16(y.data);
    if (bf16_rows && vector_y) {
        combine_bf16x8_kernel<<<unsigned(T_), 256, 0, stream>>>(
            out.ptr<__nv_bfloat16>(), slot_of_pair.ptr<int32_t>(), weights.ptr<float>(),
            weights.stride[0], k, H, reinterpret_cast<__nv_bfloat16*>(y.data), y.stride[0]);
        check_launch("combine_bf16x8_kernel");
    } else if (bf16_rows) {
        combine(out.ptr<__nv_bfloat16>());
    } else {
        combine(out.ptr<float>());
    }
}
} // namespace

// Every route runs on the device without host synchronisation (routing included), so each
// shape is capturable; the signature keeps the shape for routes that might not be.
bool moe_experts_capturable(int64_t /*pairs*/, int64_t /*H*/, int64_t /*I*/) {
    return true;
}

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, int64_t first, int64_t held) {
    const int64_t T = router_logits.size(0), E = router_logits.size(1);
    require(E <= 32 * kMaxExpertsPerLane && top_k <= 32,
            "moe_route: CUDA supports <= ", 32 * kMaxExpertsPerLane, " experts and top_k <= 32");
    if (T == 0) return;
    route_kernel<<<blocks_for(T, 4), 128, 0, stream_of(ctx)>>>(
        router_logits.ptr<float>(), router_logits.stride[0], int(E), int(top_k),
        weights.ptr<float>(), weights.stride[0], ids.ptr<int32_t>(), ids.stride[0], T, int(first),
        int(held));
    check_launch("route_kernel");
}

void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y) {
    if (x.size(0) == 0) return;
    // The GEMV kernels read 8 elements per lane step from 16-byte aligned rows.
    const bool small = x.size(0) * ids.size(1) <= kGemvMaxPairs && x.stride[0] % 8 == 0 &&
                       x.size(1) % 8 == 0 && down.size(2) % 8 == 0;
    dispatch_float(x.dtype, "moe_experts", [&](auto tag) {
        using E = decltype(tag);
        if (small)
            experts_gemv<E>(ctx, x, gate_up, down, ids, weights, y);
        else
            experts_grouped<E>(ctx, x, gate_up, down, ids, weights, y);
    });
}

bool moe_experts_fp8_fits(const TensorView& x, const WeightView& gate_up, const WeightView& down) {
    return x.dtype == DType::BF16 && gate_up.is_fp8() && down.is_fp8() && gate_up.w.ndim == 3 &&
           down.w.ndim == 3 && grouped_operands_fit(x, gate_up, down);
}

void moe_experts_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                     const WeightView& down, const TensorView& ids, const TensorView& weights,
                     const TensorView& y) {
    require(moe_experts_fp8_fits(x, gate_up, down),
            "moe_experts: fp8 experts on tensor cores need BF16 x with 16-byte aligned rows, H "
            "and I multiples of 8 (K % 16) and block_cols % 64 == 0; got x ",
            x.describe(), ", gate_up ", gate_up.w.describe(), ", down ", down.w.describe());
    if (x.size(0) == 0) return;
    experts_grouped<__nv_bfloat16>(ctx, x, gate_up, down, ids, weights, y);
}

void mark_used_experts(const ExecContext& ctx, const TensorView& ids, const TensorView& used) {
    check(cudaMemsetAsync(used.data, 0, size_t(used.nbytes()), stream_of(ctx)), "cudaMemsetAsync");
    const int64_t pairs = ids.size(0) * ids.size(1);
    if (pairs == 0) return;
    mark_used_kernel<<<unsigned((pairs + 255) / 256), 256, 0, stream_of(ctx)>>>(
        ids.ptr<int32_t>(), ids.stride[0], int(ids.size(1)), pairs, used.ptr<int32_t>());
    check_launch("mark_used_kernel");
}

} // namespace ninfer::ops::cuda
