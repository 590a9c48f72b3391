// The one-row route of linear on CUDA (decode): y[n] (+)= x . w[n, :], optionally with the
// rms_norm before it fused in (rms_norm_linear).
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
constexpr int kUnroll = 4;                // 16-byte loads per lane in flight
constexpr int kElemsPerLoad = 8;          // bf16 per 16-byte load
constexpr int kStep = 32 * kElemsPerLoad; // elements a warp covers per load
// The normalised input is staged in dynamic shared memory up to the default 48 KB a block may
// use without opting in (hidden sizes are 2048-8192: 4-16 KB).
constexpr size_t kMaxStagedBytes = 48 * 1024;

__device__ __forceinline__ void bf16x8_to_float(const uint4& raw, float (&v)[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
    }
}

// The GEMV's input vector as it enters the dot products: x itself (read through L1), or
// rms_norm(x) (NormedInput), which each block computes once into shared memory so that the dot
// products read it once, as they read x: normalising inside every dot product tripled the L1
// traffic and cost 5% of the 27B's decode.
struct PlainInput {
    const __nv_bfloat16* x;
    static size_t smem_bytes(int64_t) { return 0; }
    __device__ void prepare(int64_t) {}
    __device__ __forceinline__ void load8(int64_t c, float (&v)[8]) const {
        bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + c)), v);
    }
};

// h = rms_norm(x, norm_w, eps) with rms_norm_rows's rounding: h = bf16(x * scale * (1 + w)),
// staged in the block's dynamic shared memory (K bf16).
struct NormedInput {
    const __nv_bfloat16* x;
    const __nv_bfloat16* norm_w;
    float eps;
    static size_t smem_bytes(int64_t K) { return size_t(K) * sizeof(__nv_bfloat16); }
    __device__ __nv_bfloat16* staged() const {
        extern __shared__ __align__(16) __nv_bfloat16 gemv_smem[];
        return gemv_smem;
    }
    // All threads of the block call it (it synchronises).
    __device__ void prepare(int64_t K) {
        const int64_t step = int64_t(blockDim.x) * kElemsPerLoad;
        float sum = 0.0f;
        for (int64_t c = int64_t(threadIdx.x) * kElemsPerLoad; c < K; c += step) {
            float v[8];
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + c)), v);
#pragma unroll
            for (int j = 0; j < 8; ++j) sum += v[j] * v[j];
        }
        const float scale = rsqrtf(block_sum(sum) / float(K) + eps);
        __nv_bfloat16* h = staged();
        for (int64_t c = int64_t(threadIdx.x) * kElemsPerLoad; c < K; c += step) {
            float v[8], w[8];
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + c)), v);
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(norm_w + c)), w);
            __nv_bfloat162 packed[4];
#pragma unroll
            for (int j = 0; j < 4; ++j)
                packed[j] = __floats2bfloat162_rn(v[2 * j] * scale * (1.0f + w[2 * j]),
                                                  v[2 * j + 1] * scale * (1.0f + w[2 * j + 1]));
            *reinterpret_cast<uint4*>(h + c) = *reinterpret_cast<const uint4*>(packed);
        }
        __syncthreads();
    }
    __device__ __forceinline__ void load8(int64_t c, float (&v)[8]) const {
        bf16x8_to_float(*reinterpret_cast<const uint4*>(staged() + c), v);
    }
};

// in[c .. c+8) . w8 for the weight bytes w8.
template <typename Input>
__device__ __forceinline__ float dot8(const Input& in, int64_t c, const uint4& w8) {
    float wv[8], xv[8];
    bf16x8_to_float(w8, wv);
    in.load8(c, xv);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += xv[j] * wv[j];
    return sum;
}

// Block 0 stores the normalised input (for the norm's other consumers); others only use it.
__device__ void store_input(const NormedInput& in, int64_t K, __nv_bfloat16* h_out) {
    if (blockIdx.x != 0 || !h_out) return;
    const __nv_bfloat16* h = in.staged();
    for (int64_t c = int64_t(threadIdx.x) * kElemsPerLoad; c < K;
         c += int64_t(blockDim.x) * kElemsPerLoad)
        *reinterpret_cast<uint4*>(h_out + c) = *reinterpret_cast<const uint4*>(h + c);
}
__device__ void store_input(const PlainInput&, int64_t, __nv_bfloat16*) {}

// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> column n.
// Requires K % 8 == 0 and 16-byte aligned x, w (and norm_w, h_out) (checked by the launcher).
template <typename Y, typename Input>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemv_kernel(Input in, const __nv_bfloat16* __restrict__ w, int64_t N, int64_t K,
                Y* __restrict__ y, bool accumulate, __nv_bfloat16* h_out) {
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
    in.prepare(K);
    store_input(in, K, h_out);
    if (n >= N) return;
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        if (c + u * kStep < K) acc += dot8(in, c + u * kStep, first[u]);
    c += kUnroll * kStep;
    // Main loop: kUnroll loads issued back to back, then consumed.
    for (; c + (kUnroll - 1) * kStep < K; c += kUnroll * kStep) {
        uint4 wraw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            wraw[u] = __ldcs(reinterpret_cast<const uint4*>(row + c + u * kStep));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc += dot8(in, c + u * kStep, wraw[u]);
    }
    for (; c < K; c += kStep) acc += dot8(in, c, __ldcs(reinterpret_cast<const uint4*>(row + c)));
    acc = warp_sum(acc);
    if (lane == 0) y[n] = from_float<Y>(accumulate ? to_float(y[n]) + acc : acc);
}

template <typename Y, typename Input>
void launch(const ExecContext& ctx, const Input& in, const TensorView& w, const TensorView& y,
            bool accumulate, __nv_bfloat16* h_out) {
    const int64_t N = w.size(0), K = w.size(1);
    const size_t smem = Input::smem_bytes(K);
    launch_pdl(ctx, gemv_kernel<Y, Input>, unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock),
               32 * kWarpsPerBlock, smem, in, w.ptr<__nv_bfloat16>(), N, K, y.ptr<Y>(), accumulate,
               h_out);
}

template <typename Input>
void launch_for_output(const ExecContext& ctx, const Input& in, const TensorView& w,
                       const TensorView& y, bool accumulate, __nv_bfloat16* h_out) {
    if (y.dtype == DType::F32)
        launch<float>(ctx, in, w, y, accumulate, h_out);
    else
        launch<__nv_bfloat16>(ctx, in, w, y, accumulate, h_out);
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
    launch_for_output(ctx, PlainInput{x.ptr<__nv_bfloat16>()}, w, y, accumulate, nullptr);
}

bool rms_norm_linear_gemv_fits(const TensorView& x, const TensorView& norm_w, const TensorView& w,
                               const TensorView& h) {
    return linear_gemv_fits(x, w) && norm_w.dtype == DType::BF16 && h.dtype == DType::BF16 &&
           aligned16(norm_w.data) && aligned16(h.data) &&
           NormedInput::smem_bytes(x.size(1)) <= kMaxStagedBytes;
}

void rms_norm_linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const TensorView& w, const TensorView& y,
                          const TensorView& h) {
    require(rms_norm_linear_gemv_fits(x, norm_w, w, h),
            "rms_norm_linear_gemv: needs BF16 and 16-byte aligned rows; got ", x.describe(), ", ",
            norm_w.describe(), ", ", w.describe(), " and ", h.describe());
    launch_for_output(ctx, NormedInput{x.ptr<__nv_bfloat16>(), norm_w.ptr<__nv_bfloat16>(), eps}, w,
                      y, false, h.ptr<__nv_bfloat16>());
}

} // namespace ninfer::ops::cuda
