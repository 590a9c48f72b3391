// Groupwise W8/Q4 weights on CUDA (linear_grouped.h): the few-row GEMV, the dequantization to
// bf16 and linear_grouped, which picks between them.
//
// Numerics contract:
//   - W[n, k] = q[n, k] * scale[n, k / G] with q an integer in [-128, 127] (w8) or [-8, 7] (q4).
//   - GEMV: each lane's codes of one 16-byte load lie in one group, so the lane forms the partial
//     dot x[t, k..k+V) . q[n, k..k+V) in f32 (a bf16 times a small integer is exact in f32),
//     multiplies it by the group's scale and adds it to an f32 accumulator. f32 accumulation
//     throughout; y rounded once (y = round(y + total) with accumulate).
//   - dequantize_grouped: out = bf16_rn(f32(code) * scale), one rounding. Rows past the GEMV see
//     the weight rounded to bf16.
//
// The GEMV (linear_fp8.cu's shape): one warp per output column n streams the code row q[n, :]
// once; each lane reads 16 bytes a load (16 int8 codes, or 32 nibbles), kUnroll loads in flight,
// so a warp covers 32 x V columns of K a load. x's R rows are read through L1 (__ldg), each chunk
// of codes multiplied with every row, and the warp's R totals reduced with gemv_rows.cuh.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <cuda_fp16.h>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemv_rows.cuh"
#include "ops/cuda/groupwise_codes.cuh"
#include "ops/cuda/linear_gemv.h"
#include "ops/cuda/linear_grouped.h"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

static_assert(kGemvMaxRows >= 1 && kGemvMaxRows <= 8,
              "the groupwise GEMV is sized (registers, warp_sum_rows) for 1..8 rows");

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4; // 16-byte loads per lane in flight
// Elements of one dequantized chunk in the stream workspace (bf16: 32 MiB).
constexpr int64_t kDequantChunkElements = int64_t(16) << 20;

// acc[r] += (x[r, c .. c+V) . codes) * scale for every row r, the codes converted once.
template <int R, int BITS>
__device__ __forceinline__ void dot_rows(const __nv_bfloat16* x, int64_t x_stride, int64_t c,
                                         const uint4& raw, float scale, float (&acc)[R]) {
    constexpr int V = kCodesPerLoad<BITS>;
    float wv[V];
    codes_to_float<BITS>(raw, wv);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const uint4* xr = reinterpret_cast<const uint4*>(x + r * x_stride + c);
        float s0 = 0.0f, s1 = 0.0f; // two chains: more independent FMAs in flight
#pragma unroll
        for (int h = 0; h < V / 8; ++h) {
            float xv[8];
            bf16x8_to_float(__ldg(xr + h), xv);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if (h % 2 == 0)
                    s0 += xv[j] * wv[8 * h + j];
                else
                    s1 += xv[j] * wv[8 * h + j];
            }
        }
        acc[r] = fmaf(s0 + s1, scale, acc[r]);
    }
}

// implements: y[r, n] (+)= sum_k x[r, k] * q[n, k] * scale[n, k / G], r < R.
// chosen when: linear_gemv_grouped_fits (linear_grouped).
// assumes: K % V == 0, G % V == 0 (V = 16 for w8, 32 for q4); x and q 16-byte aligned, x's row
// stride a multiple of 8.
// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> column n.
template <typename Y, typename S, int BITS, int R>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemv_grouped_kernel(const __nv_bfloat16* __restrict__ x, int64_t x_stride,
                        const uint8_t* __restrict__ q, const S* __restrict__ scale,
                        int64_t row_bytes, int64_t groups, uint32_t group, int64_t N, int64_t K,
                        Y* __restrict__ y, int64_t y_stride, bool accumulate) {
    pdl_wait_and_release();
    const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (n >= N) return; // the whole warp: n is the warp's
    const int lane = threadIdx.x & 31;
    constexpr int V = kCodesPerLoad<BITS>;
    constexpr int64_t kStep = 32 * V; // columns of K a warp covers per load
    const uint8_t* row = q + n * row_bytes;
    const S* srow = scale + n * groups;
    float acc[R] = {};
    for (int64_t c0 = int64_t(lane) * V; c0 < K; c0 += kUnroll * kStep) {
        uint4 raw[kUnroll];
        float s[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) { // all loads first: kUnroll in flight
            const int64_t c = c0 + u * kStep;
            raw[u] = uint4{};
            s[u] = 0.0f;
            if (c < K) {
                raw[u] = __ldcs(reinterpret_cast<const uint4*>(row + (BITS == 8 ? c : c / 2)));
                s[u] = scale_to_float(__ldg(srow + uint32_t(c) / group));
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + u * kStep;
            if (c < K) dot_rows<R, BITS>(x, x_stride, c, raw[u], s[u], acc);
        }
    }
    store_rows(acc, lane, y + n, y_stride, accumulate);
}

// implements: out[r, k] = bf16(q[r, k] * scale[r, k / G]) for rows r = e * N + n of a
// [E, N, K] stack (E = 1 for a 2-D weight); rows of experts with used[e] == 0 are skipped (used
// may be null).
// Grid: a grid-stride loop over rows, each row taken by one block (threads stride over K).
template <typename S, int BITS>
__global__ void __launch_bounds__(256)
    dequantize_grouped_kernel(const uint8_t* __restrict__ q, const S* __restrict__ scale,
                              __nv_bfloat16* __restrict__ out, const int32_t* __restrict__ used,
                              int64_t rows, int64_t N, int64_t K, int64_t row_bytes,
                              int64_t groups, int64_t group) {
    pdl_wait_and_release();
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        if (used && used[r / N] == 0) continue;
        const uint8_t* src = q + r * row_bytes;
        const S* srow = scale + r * groups;
        __nv_bfloat16* dst = out + r * K;
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            const int code = BITS == 8 ? int(int8_t(src[k]))
                                       : int((src[k >> 1] >> (4 * (k & 1))) & 0xF) - 8;
            dst[k] = __float2bfloat16_rn(float(code) * scale_to_float(srow[k / group]));
        }
    }
}

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// Calls fn(S{}, std::integral_constant<int, BITS>{}) for the weight's scale dtype and width.
template <typename Fn> void with_format(const WeightView& w, Fn&& fn) {
    const bool half = w.scale.dtype == DType::F16;
    if (w.group_bits == 8) {
        if (half) return fn(__half{}, std::integral_constant<int, 8>{});
        return fn(float{}, std::integral_constant<int, 8>{});
    }
    if (half) return fn(__half{}, std::integral_constant<int, 4>{});
    fn(float{}, std::integral_constant<int, 4>{});
}

void check_y(const char* op, const TensorView& y, int64_t T, int64_t N) {
    require(y.ndim == 2 && y.size(0) == T && y.size(1) == N && y.rows_contiguous() &&
                (y.dtype == DType::BF16 || y.dtype == DType::F32),
            op, ": y must be BF16 or F32 [", T, ", ", N, "] with a contiguous last dim, got ",
            y.describe());
}

} // namespace

bool linear_gemv_grouped_fits(const TensorView& x, const WeightView& w) {
    if (x.ndim != 2 || !w.is_grouped() || w.w.ndim != 2) return false;
    const int64_t T = x.size(0), K = x.size(1);
    const int64_t V = w.group_bits == 8 ? 16 : 32;
    return T >= 1 && T <= kGemvMaxRows && x.dtype == DType::BF16 && x.rows_contiguous() &&
           K % V == 0 && w.cols == K && w.group_size % V == 0 && w.group_size <= kMaxInt32 &&
           aligned16(x.data) && (T == 1 || x.stride[0] % 8 == 0) && w.w.size(0) <= kMaxInt32 &&
           K <= kMaxInt32 && aligned16(w.w.data);
}

void linear_gemv_grouped(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                         const TensorView& y, bool accumulate) {
    constexpr const char* op = "linear_gemv_grouped";
    require(linear_gemv_grouped_fits(x, w), op, ": needs BF16 x with 1..", kGemvMaxRows,
            " rows, 16-byte aligned rows, and a 2-D groupwise weight whose loads of 16 bytes "
            "share a group; got ",
            x.describe(), " and ", w.w.describe(), " (", w.group_bits, " bits, groups of ",
            w.group_size, ")");
    check_weight(op, "w", w);
    const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
    check_y(op, y, T, N);
    if (N == 0) return;
    const auto* xp = x.ptr<__nv_bfloat16>();
    const auto* q = w.w.ptr<uint8_t>();
    const int64_t row_bytes = w.w.size(1), groups = w.scale.size(1);
    const unsigned blocks = unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
    with_format(w, [&](auto s, auto bits) {
        using S = decltype(s);
        constexpr int BITS = decltype(bits)::value;
        const S* sp = static_cast<const S*>(w.scale.data);
        with_rows(T, [&](auto r) {
            constexpr int R = decltype(r)::value;
            if (y.dtype == DType::F32)
                launch_pdl(ctx, gemv_grouped_kernel<float, S, BITS, R>, blocks,
                           32 * kWarpsPerBlock, 0, xp, x.stride[0], q, sp, row_bytes, groups,
                           uint32_t(w.group_size), N, K, y.ptr<float>(), y.stride[0], accumulate);
            else
                launch_pdl(ctx, gemv_grouped_kernel<__nv_bfloat16, S, BITS, R>, blocks,
                           32 * kWarpsPerBlock, 0, xp, x.stride[0], q, sp, row_bytes, groups,
                           uint32_t(w.group_size), N, K, y.ptr<__nv_bfloat16>(), y.stride[0],
                           accumulate);
        });
    });
}

void dequantize_grouped(const ExecContext& ctx, const WeightView& w, const TensorView& out,
                        const TensorView& used) {
    constexpr const char* op = "dequantize_grouped";
    const int nd = w.w.ndim;
    require(w.is_grouped() && (nd == 2 || nd == 3), op,
            ": a 2-D or 3-D groupwise weight expected, got ", w.w.describe());
    check_dequantize_args(op, w, out, used);
    const int64_t E = nd == 3 ? w.size(0) : 1, N = w.size(nd - 2), K = w.size(nd - 1);
    const int64_t rows = E * N;
    if (rows == 0 || K == 0) return;
    const int threads = int(std::clamp<int64_t>((K + 31) / 32 * 32, 32, 256));
    const unsigned grid =
        unsigned(std::min<int64_t>(rows, int64_t(sm_count(ctx)) * (2048 / threads)));
    const auto* q = w.w.ptr<uint8_t>();
    auto* o = out.ptr<__nv_bfloat16>();
    const int32_t* u = used.empty() ? nullptr : used.ptr<int32_t>();
    const int64_t row_bytes = w.w.size(nd - 1), groups = w.scale.size(nd - 1);
    with_format(w, [&](auto s, auto bits) {
        using S = decltype(s);
        constexpr int BITS = decltype(bits)::value;
        launch_pdl(ctx, dequantize_grouped_kernel<S, BITS>, grid, threads, 0, q,
                   static_cast<const S*>(w.scale.data), o, u, rows, N, K, row_bytes, groups,
                   w.group_size);
    });
}

void linear_grouped(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                    const TensorView& y, bool accumulate) {
    require(x.dtype == DType::BF16,
            "linear: groupwise weights run with BF16 activations on CUDA, got x ", x.describe());
    require(w.is_grouped() && w.w.ndim == 2, "linear_grouped: a 2-D groupwise weight expected, got ",
            w.w.describe());
    const int64_t T = x.size(0), N = w.size(0), K = w.size(1);
    if (T == 0 || N == 0) return;
    check_y("linear_grouped", y, T, N);
    // Rows through the GEMV, kGemvMaxRows at a time, up to the route table's linear.grouped
    // boundary (built in: 32 rows; each pass reads the codes once, a quarter of bf16's bytes for
    // q4, so four passes cost one bf16 read, cheaper than dequantizing the whole weight for a
    // few rows). Past it, dequantize + cuBLAS.
    bool gemv = active_route_table().route(RouteId::LinearGrouped, T) == kRouteGemv;
    for (int64_t t = 0; gemv && t < T; t += kGemvMaxRows)
        gemv = linear_gemv_grouped_fits(x.narrow(0, t, std::min(kGemvMaxRows, T - t)), w);
    if (gemv) {
        for (int64_t t = 0; t < T; t += kGemvMaxRows) {
            const int64_t rows = std::min(kGemvMaxRows, T - t);
            linear_gemv_grouped(ctx, x.narrow(0, t, rows), w, y.narrow(0, t, rows), accumulate);
        }
        return;
    }
    // Dequantize row chunks of the weight into the stream workspace; cuBLAS fills the chunk's
    // columns of y.
    require(K <= kMaxInt32 && N <= kMaxInt32, "linear_grouped: ", w.w.describe(), " is too large");
    const int64_t chunk = std::max<int64_t>(1, std::min(N, kDequantChunkElements / K));
    auto* scratch = static_cast<__nv_bfloat16*>(
        stream_workspace(ctx, size_t(chunk * K) * sizeof(__nv_bfloat16)));
    for (int64_t r = 0; r < N; r += chunk) {
        const int64_t rows = std::min(chunk, N - r);
        const TensorView dense =
            TensorView::contiguous(scratch, DType::BF16, x.device, {rows, K});
        dequantize_grouped(ctx, w.rows(r, rows), dense);
        linear_cublas(ctx, x, dense, y.narrow(1, r, rows), accumulate);
    }
}

} // namespace ninfer::ops::cuda
