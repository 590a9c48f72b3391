// Implements moe_route and moe_experts (ops/moe.h) on CUDA.
// moe_route: one warp per token; softmax in f32, top-k by repeated warp argmax (ties: lower id).
// moe_experts, two routes by the number of (token, expert) pairs P = T * k:
//   P <= kGemvMaxPairs (decode) and H, I multiples of 8: warp-per-output GEMV kernels with
//     16-byte loads read each selected expert's rows once per pair; f32 intermediates; a
//     deterministic combine adds the k weighted outputs.
//   larger P (prefill): pairs sorted by expert on the host (ids downloaded once per layer),
//     gathered, two cuBLAS GEMMs per active expert over contiguous slices, one activation
//     kernel, and the same deterministic combine.
#include <algorithm>
#include <cfloat>
#include <vector>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/memory.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxExpertsPerLane = 16; // E <= 512
constexpr int64_t kGemvMaxPairs = 64;

__global__ void route_kernel(const float* logits, int64_t l_s0, int E, int top_k, float* weights,
                             int64_t w_s0, int32_t* ids, int64_t i_s0, int64_t T) {
    const int64_t t = blockIdx.x * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (t >= T) return;
    const int lane = threadIdx.x & 31;
    const float* l = logits + t * l_s0;
    float p[kMaxExpertsPerLane];
    float max_logit = -FLT_MAX;
#pragma unroll
    for (int m = 0; m < kMaxExpertsPerLane; ++m) {
        const int e = lane + 32 * m;
        p[m] = e < E ? l[e] : -FLT_MAX;
        max_logit = fmaxf(max_logit, p[m]);
    }
    max_logit = warp_max(max_logit);
    float sum = 0.0f;
#pragma unroll
    for (int m = 0; m < kMaxExpertsPerLane; ++m) {
        const int e = lane + 32 * m;
        p[m] = e < E ? __expf(p[m] - max_logit) : -1.0f;
        sum += e < E ? p[m] : 0.0f;
    }
    sum = warp_sum(sum);
    float chosen_sum = 0.0f;
    float chosen[32];
    int chosen_id[32];
    for (int j = 0; j < top_k; ++j) {
        float best = -2.0f;
        int best_id = INT_MAX;
#pragma unroll
        for (int m = 0; m < kMaxExpertsPerLane; ++m) {
            const int e = lane + 32 * m;
            if (p[m] > best) { // strict: the lower id wins ties within a lane
                best = p[m];
                best_id = e;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(0xffffffffu, best, offset);
            const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
            if (other > best || (other == best && other_id < best_id)) {
                best = other;
                best_id = other_id;
            }
        }
#pragma unroll
        for (int m = 0; m < kMaxExpertsPerLane; ++m)
            if (lane + 32 * m == best_id) p[m] = -1.0f; // taken
        chosen[j] = best / sum;
        chosen_id[j] = best_id;
        chosen_sum += chosen[j];
    }
    if (lane != 0) return;
    for (int j = 0; j < top_k; ++j) {
        weights[t * w_s0 + j] = chosen[j] / chosen_sum;
        ids[t * i_s0 + j] = chosen_id[j];
    }
}

// Loads 8 consecutive elements as floats (one 16-byte load for bf16, two for f32).
template <typename T> __device__ __forceinline__ void load8(const T* p, float (&v)[8]);
template <>
__device__ __forceinline__ void load8<__nv_bfloat16>(const __nv_bfloat16* p, float (&v)[8]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
    }
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

// act[p, i] = silu(G_e x) * (U_e x) for pair p = (t, j), e = ids[t, j]; one warp per (p, i).
// Assumes H % 8 == 0 (checked by the launcher).
template <typename T>
__global__ void expert_up_gemv(const T* x, int64_t x_s0, const T* gate_up, const int32_t* ids,
                               int64_t i_s0, int k, int64_t I, int64_t H, float* act) {
    const int64_t pair = blockIdx.x;
    const int64_t i = blockIdx.y * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (i >= I) return;
    const int64_t t = pair / k;
    const int e = ids[t * i_s0 + pair % k];
    const T* g = gate_up + (int64_t(e) * 2 * I + i) * H;
    const float2 gu = warp_dot2(x + t * x_s0, g, g + I * H, H);
    if ((threadIdx.x & 31) == 0) act[pair * I + i] = gu.x / (1.0f + __expf(-gu.x)) * gu.y;
}

// out[p, c] = down_e[c, :] . act[p, :]; one warp per (p, c). Assumes I % 8 == 0.
template <typename T>
__global__ void expert_down_gemv(const float* act, const T* down, const int32_t* ids, int64_t i_s0,
                                 int k, int64_t I, int64_t H, float* out) {
    const int64_t pair = blockIdx.x;
    const int64_t c = blockIdx.y * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (c >= H) return;
    const int e = ids[(pair / k) * i_s0 + pair % k];
    const float2 d = warp_dot2<float, T>(act + pair * I, down + (int64_t(e) * H + c) * I,
                                         static_cast<const T*>(nullptr), I);
    if ((threadIdx.x & 31) == 0) out[pair * H + c] = d.x;
}

// y[t, c] += sum_j w[t, j] * out[slot(t, j), c], slot = t * k + j or its sorted position.
template <typename T>
__global__ void combine_kernel(const float* out, const int32_t* slot_of_pair, const float* w,
                               int64_t w_s0, int k, int64_t H, T* y, int64_t y_s0) {
    const int64_t t = blockIdx.x;
    for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) {
            const int64_t pair = t * k + j;
            const int64_t slot = slot_of_pair ? slot_of_pair[pair] : pair;
            sum += w[t * w_s0 + j] * out[slot * H + c];
        }
        y[t * y_s0 + c] = from_float<T>(to_float(y[t * y_s0 + c]) + sum);
    }
}

template <typename T>
__global__ void gather_pairs(const T* x, int64_t x_s0, const int32_t* token_of_slot, int64_t H,
                             T* xs) {
    const int64_t slot = blockIdx.x;
    const T* src = x + int64_t(token_of_slot[slot]) * x_s0;
    for (int64_t c = threadIdx.x; c < H; c += blockDim.x) xs[slot * H + c] = src[c];
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

template <typename T>
void experts_grouped(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                     const TensorView& down, const TensorView& ids, const TensorView& weights,
                     const TensorView& y) {
    const int64_t T_ = x.size(0), H = x.size(1), E = gate_up.size(0), I = down.size(2);
    const int k = int(ids.size(1));
    const int64_t pairs = T_ * k;
    // Sort pairs by expert on the host (stable: token order within an expert).
    std::vector<int32_t> host_ids(static_cast<size_t>(pairs));
    Tensor ids_copy = scratch(ctx, DType::I32, {T_, k});
    check(cudaMemcpy2DAsync(ids_copy.ptr<int32_t>(), size_t(k) * 4, ids.data,
                            size_t(ids.stride[0]) * 4, size_t(k) * 4, size_t(T_),
                            cudaMemcpyDeviceToDevice, stream_of(ctx)),
          "moe ids copy");
    ops::download(ctx, ids_copy.view(),
                  TensorView::contiguous(host_ids.data(), DType::I32, Device::cpu(), {pairs}));
    std::vector<int64_t> count(static_cast<size_t>(E), 0), start(static_cast<size_t>(E) + 1, 0);
    for (int32_t e : host_ids) ++count[size_t(e)];
    for (int64_t e = 0; e < E; ++e) start[size_t(e) + 1] = start[size_t(e)] + count[size_t(e)];
    std::vector<int32_t> token_of_slot(static_cast<size_t>(pairs)),
        slot_of_pair(static_cast<size_t>(pairs));
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < pairs; ++p) {
        const int64_t slot = fill[size_t(host_ids[size_t(p)])]++;
        token_of_slot[size_t(slot)] = int32_t(p / k);
        slot_of_pair[size_t(p)] = int32_t(slot);
    }
    Tensor d_token = scratch(ctx, DType::I32, {pairs}), d_slot = scratch(ctx, DType::I32, {pairs});
    ops::upload(ctx,
                TensorView::contiguous(token_of_slot.data(), DType::I32, Device::cpu(), {pairs}),
                d_token.view());
    ops::upload(ctx,
                TensorView::contiguous(slot_of_pair.data(), DType::I32, Device::cpu(), {pairs}),
                d_slot.view());
    const DType dt = x.dtype;
    Tensor xs = scratch(ctx, dt, {pairs, H}), h1 = scratch(ctx, dt, {pairs, 2 * I});
    Tensor act = scratch(ctx, dt, {pairs, I}), out = scratch(ctx, DType::F32, {pairs, H});
    gather_pairs<T><<<unsigned(pairs), 256, 0, stream_of(ctx)>>>(
        x.ptr<T>(), x.stride[0], d_token.ptr<int32_t>(), H, xs.ptr<T>());
    check_launch("gather_pairs");
    for (int64_t e = 0; e < E; ++e) {
        const int64_t n = count[size_t(e)], s0 = start[size_t(e)];
        if (n == 0) continue;
        cuda::linear(ctx, xs.view().narrow(0, s0, n), gate_up.narrow(0, e, 1).reshape({2 * I, H}),
                     h1.view().narrow(0, s0, n), false);
    }
    cuda::silu_mul(ctx, h1.view(), act.view());
    for (int64_t e = 0; e < E; ++e) {
        const int64_t n = count[size_t(e)], s0 = start[size_t(e)];
        if (n == 0) continue;
        cuda::linear(ctx, act.view().narrow(0, s0, n), down.narrow(0, e, 1).reshape({H, I}),
                     out.view().narrow(0, s0, n), false);
    }
    combine_kernel<T><<<unsigned(T_), 256, 0, stream_of(ctx)>>>(
        out.ptr<float>(), d_slot.ptr<int32_t>(), weights.ptr<float>(), weights.stride[0], k, H,
        y.ptr<T>(), y.stride[0]);
    check_launch("combine_kernel");
}

} // namespace

// The GEMV route (no host synchronisation) takes few pairs; its kernels read 8 elements per lane
// step from 16-byte aligned rows.
bool moe_experts_capturable(int64_t pairs, int64_t H, int64_t I) {
    return pairs <= kGemvMaxPairs && H % 8 == 0 && I % 8 == 0;
}

void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids) {
    const int64_t T = router_logits.size(0), E = router_logits.size(1);
    require(E <= 32 * kMaxExpertsPerLane && top_k <= 32,
            "moe_route: CUDA supports <= ", 32 * kMaxExpertsPerLane, " experts and top_k <= 32");
    if (T == 0) return;
    route_kernel<<<blocks_for(T, 4), 128, 0, stream_of(ctx)>>>(
        router_logits.ptr<float>(), router_logits.stride[0], int(E), int(top_k),
        weights.ptr<float>(), weights.stride[0], ids.ptr<int32_t>(), ids.stride[0], T);
    check_launch("route_kernel");
}

void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y) {
    if (x.size(0) == 0) return;
    const bool small = x.stride[0] % 8 == 0 &&
                       moe_experts_capturable(x.size(0) * ids.size(1), x.size(1), down.size(2));
    dispatch_float(x.dtype, "moe_experts", [&](auto tag) {
        using E = decltype(tag);
        if (small)
            experts_gemv<E>(ctx, x, gate_up, down, ids, weights, y);
        else
            experts_grouped<E>(ctx, x, gate_up, down, ids, weights, y);
    });
}

} // namespace ninfer::ops::cuda
