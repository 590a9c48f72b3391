// The few-row route of linear on CUDA (decode, speculative verification, small batches):
// y[t, n] (+)= x[t] . w[n, :] for 1..kGemvMaxRows rows, optionally with the rms_norm before it
// fused in (rms_norm_linear).
// One warp per output column n streams w[n, :] once: each lane reads 16 bytes (8 bf16) of the row
// per step, four steps in flight before the first multiply, so a warp keeps 2 KB of the weight
// stream in the air and an SM's 48 resident warps about 100 KB: enough to cover HBM latency at the
// H200's 4.8 TB/s without relying on cuBLAS's GEMV heuristics. Every weight chunk is multiplied
// with each of the R rows of x (R a template parameter, so the R accumulators stay in registers):
// the weights are read once whatever the row count. x (at most 8 x 5120 x 2 bytes here) is read
// through the read-only cache, so the blocks of one SM share it from L1; that L1 traffic grows
// with R (R x 16 bytes per 16 bytes of weights), which is what bounds the useful row count.
// Accumulation in f32, y rounded once.
#include <type_traits>
#include <utility>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gemv_input.cuh"
#include "ops/cuda/gemv_rows.cuh"
#include "ops/cuda/linear_gemv.h"

namespace ninfer::ops::cuda {
namespace {

// Register budget: at 8 rows, 8 accumulators, 2 x kUnroll uint4 weights (the pipelined loop) and
// the x chunks in flight take 76 registers, no spills (ptxas -v); more rows would need a smaller
// kUnroll.
static_assert(kGemvMaxRows >= 1 && kGemvMaxRows <= 8,
              "the GEMV kernels are sized (registers, warp_sum_rows) for 1..8 rows");

using gemv::dot8_rows;
using gemv::NormedInput;
using gemv::PlainInput;
constexpr int kWarpsPerBlock = gemv::kBlockWarps;
constexpr int kUnroll = gemv::kBf16Unroll;       // 16-byte loads per lane in flight
constexpr int kElemsPerLoad = gemv::kInputElems; // bf16 per 16-byte load
constexpr int kStep = gemv::kBf16Step;           // elements a warp covers per load

// The lane's chunks of `row` from c to K: kUnroll loads issued back to back, then consumed; then
// the tail one load at a time.
template <typename Input>
__device__ __forceinline__ void dot_rest(const Input& in, const __nv_bfloat16* row, int64_t c,
                                         int64_t K, float (&acc)[Input::kRows]) {
    for (; c + (kUnroll - 1) * kStep < K; c += kUnroll * kStep) {
        uint4 wraw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            wraw[u] = __ldcs(reinterpret_cast<const uint4*>(row + c + u * kStep));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dot8_rows(in, c + u * kStep, wraw[u], acc);
    }
    for (; c < K; c += kStep)
        dot8_rows(in, c, __ldcs(reinterpret_cast<const uint4*>(row + c)), acc);
}

// implements: y[r, n] (+)= in[r] . w[n, :] for the Input::kRows rows r (in: x or rms_norm(x)).
// chosen when: gemv_preferred (linear.cu) and linear_gemv_fits / rms_norm_linear_gemv_fits.
// assumes: K % 8 == 0; x, w (and norm_w, h_out) 16-byte aligned, row strides multiples of 8.
// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> column n.
template <typename Y, typename Input>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemv_kernel(Input in, const __nv_bfloat16* __restrict__ w, int64_t N, int64_t K,
                Y* __restrict__ y, int64_t y_stride, bool accumulate, __nv_bfloat16* h_out,
                int64_t h_stride) {
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
    store_input(in, K, h_out, h_stride);
    if (n >= N) return;
    float acc[Input::kRows] = {};
    // One row keeps the unpipelined loop: ptxas keeps its loads together there without the extra
    // registers of a second set of chunks (40 registers against 62 for two rows).
    if constexpr (Input::kRows == 1) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            if (c + u * kStep < K) dot8_rows(in, c + u * kStep, first[u], acc);
        dot_rest(in, row, c + kUnroll * kStep, K, acc);
    } else {
        gemv::dot_rest_pipelined(in, row, c, K, first, acc);
    }
    store_rows(acc, lane, y + n, y_stride, accumulate);
}

template <typename Y, typename Input>
void launch(const ExecContext& ctx, const Input& in, const TensorView& w, const TensorView& y,
            bool accumulate, __nv_bfloat16* h_out, int64_t h_stride) {
    const int64_t N = w.size(0), K = w.size(1);
    const size_t smem = Input::smem_bytes(K);
    launch_pdl(ctx, gemv_kernel<Y, Input>, unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock),
               32 * kWarpsPerBlock, smem, in, w.ptr<__nv_bfloat16>(), N, K, y.ptr<Y>(), y.stride[0],
               accumulate, h_out, h_stride);
}

template <typename Input>
void launch_for_output(const ExecContext& ctx, const Input& in, const TensorView& w,
                       const TensorView& y, bool accumulate, __nv_bfloat16* h_out,
                       int64_t h_stride) {
    if (y.dtype == DType::F32)
        launch<float>(ctx, in, w, y, accumulate, h_out, h_stride);
    else
        launch<__nv_bfloat16>(ctx, in, w, y, accumulate, h_out, h_stride);
}


// Whether every row of a [T, K] bf16 view starts 16-byte aligned: the first, and from two rows on
// the row stride a multiple of 8 elements.
bool rows_aligned16(const TensorView& t) {
    return aligned16(t.data) && (t.size(0) == 1 || t.stride[0] % kElemsPerLoad == 0);
}

} // namespace

bool linear_gemv_fits(const TensorView& x, const TensorView& w) {
    const int64_t T = x.size(0), K = x.size(1);
    return T >= 1 && T <= kGemvMaxRows && x.dtype == DType::BF16 && w.dtype == DType::BF16 &&
           K % kElemsPerLoad == 0 && rows_aligned16(x) && aligned16(w.data);
}

void linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& y, bool accumulate) {
    require(linear_gemv_fits(x, w), "linear_gemv: needs BF16, 1..", kGemvMaxRows,
            " rows, K % 8 == 0 and 16-byte aligned rows; got ", x.describe(), " and ",
            w.describe());
    const auto* xp = x.ptr<__nv_bfloat16>();
    with_rows(x.size(0), [&](auto rows) {
        const PlainInput<decltype(rows)::value> in{xp, x.stride[0]};
        launch_for_output(ctx, in, w, y, accumulate, nullptr, 0);
    });
}

bool rms_norm_linear_gemv_fits(const TensorView& x, const TensorView& norm_w, const TensorView& w,
                               const TensorView& h) {
    const int64_t T = x.size(0), K = x.size(1);
    return linear_gemv_fits(x, w) && norm_w.dtype == DType::BF16 && h.dtype == DType::BF16 &&
           aligned16(norm_w.data) && rows_aligned16(h) &&
           size_t(T) * size_t(K) * sizeof(__nv_bfloat16) <= gemv::kMaxStagedBytes;
}

void rms_norm_linear_gemv(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                          float eps, const TensorView& w, const TensorView& y,
                          const TensorView& h) {
    require(rms_norm_linear_gemv_fits(x, norm_w, w, h), "rms_norm_linear_gemv: needs BF16, 1..",
            kGemvMaxRows, " rows, 16-byte aligned rows and ", gemv::kMaxStagedBytes,
            " bytes of shared memory for the normalised rows; got ", x.describe(), ", ",
            norm_w.describe(), ", ", w.describe(), " and ", h.describe());
    const auto* xp = x.ptr<__nv_bfloat16>();
    const auto* nwp = norm_w.ptr<__nv_bfloat16>();
    with_rows(x.size(0), [&](auto rows) {
        const NormedInput<decltype(rows)::value> in{xp, x.stride[0], nwp, eps, x.size(1)};
        launch_for_output(ctx, in, w, y, false, h.ptr<__nv_bfloat16>(), h.stride[0]);
    });
}

} // namespace ninfer::ops::cuda
