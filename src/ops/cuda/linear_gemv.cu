// The small-T route of linear on CUDA (decode): y[t, n] (+)= x[t, :] . w[n, :] for T <= kGemvMaxRows.
// One warp per output column n; each lane reads 16 bytes (8 bf16) of w's row per step, four steps
// in flight before the first multiply, so a warp keeps 2 KB of the weight stream in the air and an
// SM's 48 resident warps about 100 KB: enough to cover HBM latency at the H200's 4.8 TB/s without
// relying on cuBLAS's GEMV heuristics. x (T rows, at most 8 x 5120 x 2 bytes) is read through the
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

// acc[t] += x[t, c .. c+8) . wv for every row t < T.
template <int T>
__device__ __forceinline__ void fma_rows(const __nv_bfloat16* x, int64_t x_s0, int64_t c,
                                         const uint4& wraw, float (&acc)[T]) {
    float wv[8];
    bf16x8_to_float(wraw, wv);
#pragma unroll
    for (int t = 0; t < T; ++t) {
        float xv[8];
        bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + t * x_s0 + c)), xv);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[t] += xv[j] * wv[j];
    }
}

// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> column n.
// Requires K % 8 == 0, x_s0 % 8 == 0 and 16-byte aligned x and w (checked by the launcher).
template <int T, typename Y>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemv_kernel(const __nv_bfloat16* __restrict__ x, int64_t x_s0,
                const __nv_bfloat16* __restrict__ w, int64_t N, int64_t K, Y* __restrict__ y,
                int64_t y_s0, bool accumulate) {
    const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (n >= N) return;
    const int lane = threadIdx.x & 31;
    const __nv_bfloat16* row = w + n * K;
    float acc[T];
#pragma unroll
    for (int t = 0; t < T; ++t) acc[t] = 0.0f;
    int64_t c = int64_t(lane) * kElemsPerLoad;
    // Main loop: kUnroll loads issued back to back, then consumed.
    for (; c + (kUnroll - 1) * kStep < K; c += kUnroll * kStep) {
        uint4 wraw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            wraw[u] = __ldcs(reinterpret_cast<const uint4*>(row + c + u * kStep));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) fma_rows<T>(x, x_s0, c + u * kStep, wraw[u], acc);
    }
    for (; c < K; c += kStep)
        fma_rows<T>(x, x_s0, c, __ldcs(reinterpret_cast<const uint4*>(row + c)), acc);
#pragma unroll
    for (int t = 0; t < T; ++t) acc[t] = warp_sum(acc[t]);
    if (lane != 0) return;
#pragma unroll
    for (int t = 0; t < T; ++t) {
        Y* out = y + t * y_s0 + n;
        *out = from_float<Y>(accumulate ? to_float(*out) + acc[t] : acc[t]);
    }
}

template <int T, typename Y>
void launch(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate) {
    const int64_t N = w.size(0), K = w.size(1);
    gemv_kernel<T, Y><<<unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock,
                        0, stream_of(ctx)>>>(x.ptr<__nv_bfloat16>(), x.stride[0],
                                             w.ptr<__nv_bfloat16>(), N, K, y.ptr<Y>(), y.stride[0],
                                             accumulate);
    check_launch("gemv_kernel");
}

template <typename Y>
void launch_rows(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate) {
    switch (x.size(0)) {
    case 1: return launch<1, Y>(ctx, x, w, y, accumulate);
    case 2: return launch<2, Y>(ctx, x, w, y, accumulate);
    case 3: return launch<3, Y>(ctx, x, w, y, accumulate);
    case 4: return launch<4, Y>(ctx, x, w, y, accumulate);
    case 5: return launch<5, Y>(ctx, x, w, y, accumulate);
    case 6: return launch<6, Y>(ctx, x, w, y, accumulate);
    case 7: return launch<7, Y>(ctx, x, w, y, accumulate);
    case 8: return launch<8, Y>(ctx, x, w, y, accumulate);
    default: fail(ErrorCategory::Internal, "linear_gemv: ", x.size(0), " rows > ", kGemvMaxRows);
    }
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

bool linear_gemv_fits(const TensorView& x, const TensorView& w) {
    const int64_t T = x.size(0), K = x.size(1);
    return T >= 1 && T <= kGemvMaxRows && x.dtype == DType::BF16 && w.dtype == DType::BF16 &&
           K % kElemsPerLoad == 0 && x.stride[0] % kElemsPerLoad == 0 && aligned16(x.data) &&
           aligned16(w.data);
}

void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate) {
    require(linear_gemv_fits(x, w), "linear_gemv: needs BF16, 1..", kGemvMaxRows,
            " rows, K % 8 == 0 and 16-byte aligned rows; got ", x.describe(), " and ",
            w.describe());
    if (y.dtype == DType::F32)
        launch_rows<float>(ctx, x, w, y, accumulate);
    else
        launch_rows<__nv_bfloat16>(ctx, x, w, y, accumulate);
}

} // namespace ninfer::ops::cuda
