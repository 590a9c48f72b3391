// The one-row route of linear on CUDA (decode): y[n] (+)= x . w[n, :].
// One warp per output column n; each lane reads 16 bytes (8 bf16) of w's row per step, four steps
// in flight before the first multiply, so a warp keeps 2 KB of the weight stream in the air and an
// SM's 48 resident warps about 100 KB: enough to cover HBM latency at the H200's 4.8 TB/s without
// relying on cuBLAS's GEMV heuristics. x (at most 5120 x 2 bytes here) is read through the
// read-only cache, so the blocks of one SM share it from L1. Accumulation in f32, y rounded once.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/linear_gemv.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;          // 16-byte loads per lane in flight
constexpr int kElemsPerLoad = 8;    // bf16 per 16-byte load
constexpr int kStep = 32 * kElemsPerLoad; // elements a warp covers per load

__device__ __forceinline__ void bf16x8_to_float(const uint4& raw, float (&v)[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
    }
}

// x[c .. c+8) . w8 for the weight bytes w8.
__device__ __forceinline__ float dot8(const __nv_bfloat16* x, int64_t c, const uint4& w8) {
    float wv[8], xv[8];
    bf16x8_to_float(w8, wv);
    bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + c)), xv);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += xv[j] * wv[j];
    return sum;
}

// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> column n.
// Requires K % 8 == 0 and 16-byte aligned x and w (checked by the launcher).
template <typename Y>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemv_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                int64_t N, int64_t K, Y* __restrict__ y, bool accumulate) {
    const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const __nv_bfloat16* row = w + (n < N ? n : 0) * K;
    int64_t c = int64_t(lane) * kElemsPerLoad;
    // Weights are written only while a model loads, never by a kernel in flight, so the first
    // loads may precede the dependency wait (the exception pdl_wait_and_release allows): they
    // stream while the previous kernel finishes.
    uint4 first[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        first[u] = c + u * kStep < K ? __ldcs(reinterpret_cast<const uint4*>(row + c + u * kStep))
                                     : uint4{};
    pdl_wait_and_release();
    if (n >= N) return;
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        if (c + u * kStep < K) acc += dot8(x, c + u * kStep, first[u]);
    c += kUnroll * kStep;
    // Main loop: kUnroll loads issued back to back, then consumed.
    for (; c + (kUnroll - 1) * kStep < K; c += kUnroll * kStep) {
        uint4 wraw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            wraw[u] = __ldcs(reinterpret_cast<const uint4*>(row + c + u * kStep));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc += dot8(x, c + u * kStep, wraw[u]);
    }
    for (; c < K; c += kStep) acc += dot8(x, c, __ldcs(reinterpret_cast<const uint4*>(row + c)));
    acc = warp_sum(acc);
    if (lane == 0) y[n] = from_float<Y>(accumulate ? to_float(y[n]) + acc : acc);
}

template <typename Y>
void launch(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate) {
    const int64_t N = w.size(0), K = w.size(1);
    launch_pdl(ctx, gemv_kernel<Y>, unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock),
               32 * kWarpsPerBlock, 0, x.ptr<__nv_bfloat16>(), w.ptr<__nv_bfloat16>(), N, K,
               y.ptr<Y>(), accumulate);
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

bool linear_gemv_fits(const TensorView& x, const TensorView& w) {
    const int64_t T = x.size(0), K = x.size(1);
    return T >= 1 && T <= kGemvMaxRows && x.dtype == DType::BF16 && w.dtype == DType::BF16 &&
           K % kElemsPerLoad == 0 && aligned16(x.data) && aligned16(w.data);
}

void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate) {
    require(linear_gemv_fits(x, w), "linear_gemv: needs BF16, 1..", kGemvMaxRows,
            " rows, K % 8 == 0 and 16-byte aligned rows; got ", x.describe(), " and ",
            w.describe());
    if (y.dtype == DType::F32)
        launch<float>(ctx, x, w, y, accumulate);
    else
        launch<__nv_bfloat16>(ctx, x, w, y, accumulate);
}

} // namespace ninfer::ops::cuda
