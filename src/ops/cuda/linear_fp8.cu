// Block-wise fp8 weights on CUDA (linear_fp8.h): the few-row fp8 GEMV, the dequantization to bf16
// and linear_fp8, which picks the GEMV, the tensor-core GEMM (moe_grouped.cu in dense mode) or
// dequantize + cuBLAS.
//
// Numerics contract:
//   - W[n, k] = e4m3(q[n, k]) * scale[n / Br, k / Bc]: f32 products of code and scale (the code
//     is decoded exactly: e4m3 -> f16 -> f32).
//   - GEMV: each lane's 16 codes lie in one scale block (16 | Bc), so the lane forms the 16-term
//     partial dot x[t, k..k+16) . e4m3(q[n, k..k+16)) in f32 (each product of a bf16 and an e4m3
//     is exact in f32: 8 + 4 significant bits), multiplies it by the block's scale and adds it to
//     an f32 accumulator: within f32 rounding of x . W in real arithmetic. f32 accumulation
//     throughout; y rounded once (y = round(y + total) with accumulate).
//   - dequantize_fp8: out = bf16_rn(f32(code) * scale), one rounding; NaN codes (S.1111.111)
//     give NaN.
//   - linear_fp8 past the GEMV: the tensor-core GEMM multiplies bf16 x by bf16_rn(code * scale)
//     formed in shared memory (dequantize_fp8's values) with f32 accumulation, y rounded once;
//     shapes it does not take: dequantize_fp8 into a bf16 scratch, then cuBLAS. Either way those
//     rows see the weight rounded to bf16.
//
// The GEMV (linear_gemv.cu's design, one byte a weight): one warp per output column n streams the
// code row q[n, :] once; each lane reads 16 bytes (16 codes) a step, so a warp covers 512 columns
// of K a step, with kUnroll = 4 steps in flight (2 KB of the weight stream per warp, as the bf16
// GEMV). The lane's block scale is read with its codes (through the read-only cache: the scale row
// is shared by Br output columns); the scale column of each step comes from a running quotient
// and remainder (no division in the loop). x's R rows are read through L1 (__ldg), each weight
// chunk multiplied with every row (R a template parameter, so the accumulators stay in registers),
// and the warp's R totals reduced with gemv_rows.cuh's transposed butterfly.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/cuda/gemv_input.cuh"
#include "ops/cuda/gemv_rows.cuh"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/moe_grouped.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

static_assert(kGemvMaxRows >= 1 && kGemvMaxRows <= 8,
              "the fp8 GEMV is sized (registers, warp_sum_rows) for 1..8 rows");

constexpr int kWarpsPerBlock = gemv::kBlockWarps;
constexpr int kUnroll = 4;                // 16-byte loads per lane in flight
constexpr int kCodesPerLoad = 16;         // e4m3 codes per 16-byte load
constexpr int kStep = 32 * kCodesPerLoad; // columns of K a warp covers per load

// Codes decode with fp8_codes.cuh's fp8x16_to_float / fp8_to_float (exact).

// The GEMV's view of an fp8 weight [N, K].
struct Fp8Rows {
    const uint8_t* q;     // codes [N, K], contiguous
    const float* scale;   // [ceil(N / Br), ceil(K / Bc)]
    int64_t scale_stride; // floats between scale rows
    uint32_t block_rows;  // Br >= 1
    uint32_t block_cols;  // Bc, a multiple of 16
    uint32_t step_q;      // kStep / Bc: scale columns a step of kStep advances by ...
    uint32_t step_r;      // ... and kStep % Bc, the remainder
};

// The lane's position in the scale row: the scale column q of the next chunk it loads and the
// chunk's offset r inside that block (r < Bc). Advancing by kStep needs no division.
struct ScaleCursor {
    uint32_t q, r;
    __device__ __forceinline__ void advance(const Fp8Rows& w) {
        q += w.step_q;
        r += w.step_r;
        if (r >= w.block_cols) { // r < Bc and step_r < Bc: one subtraction is enough
            r -= w.block_cols;
            ++q;
        }
    }
};

// 16 codes and the scale of their block.
struct Chunk {
    uint4 codes;
    float scale;
};

// The chunk at column c < K of the code row; advances the cursor.
__device__ __forceinline__ Chunk load_chunk(const uint8_t* row, const float* srow, int64_t c,
                                            ScaleCursor& cur, const Fp8Rows& w) {
    const Chunk ch{__ldcs(reinterpret_cast<const uint4*>(row + c)), __ldg(srow + cur.q)};
    cur.advance(w);
    return ch;
}
// The same for any c (zero past K); advances the cursor either way.
__device__ __forceinline__ Chunk load_chunk_or_zero(const uint8_t* row, const float* srow,
                                                    int64_t c, int64_t K, ScaleCursor& cur,
                                                    const Fp8Rows& w) {
    if (c < K) return load_chunk(row, srow, c, cur, w);
    cur.advance(w);
    return Chunk{uint4{}, 0.0f};
}

// acc[r] += (in[r, c .. c+16) . e4m3(codes)) * scale for every row r, the codes converted once.
template <typename Input>
__device__ __forceinline__ void dot16_rows(const Input& in, int64_t c, const Chunk& ch,
                                           float (&acc)[Input::kRows]) {
    float wv[16];
    fp8x16_to_float(ch.codes, wv);
#pragma unroll
    for (int r = 0; r < Input::kRows; ++r) {
        float lo[8], hi[8];
        in.load8(r, c, lo);
        in.load8(r, c + 8, hi);
        float s0 = 0.0f, s1 = 0.0f; // two chains: more independent FMAs in flight
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            s0 += lo[j] * wv[j];
            s1 += hi[j] * wv[8 + j];
        }
        acc[r] = fmaf(s0 + s1, ch.scale, acc[r]);
    }
}

// Blocks per SM the GEMV is compiled for (ptxas -v, sm_90a): up to two rows 3 (72-80 registers,
// no spills: 24 warps an SM, each with 2 KB of the weight stream in flight); from three rows on
// the accumulators and the x chunks take 105-128 registers, which 80 would spill, so 2 (16 warps).
template <int R> constexpr int kMinBlocks = R <= 2 ? 3 : 2;

// A second weight on the GEMV's input rows, in BF16 (rms_norm_linear_pair: the GDN's in_proj_ba
// beside its fp8 in_proj): blocks from first_block on take its rows, y2 = in . w2^T.
template <typename Y> struct Bf16Tail {
    const __nv_bfloat16* w; // [N, K], rows contiguous, 16-byte aligned
    int64_t N;
    Y* y;
    int64_t y_stride;
    unsigned first_block; // = the fp8 weight's blocks; the grid's size when there is no tail
};

// The tail blocks' part of gemv_fp8_kernel: linear_gemv.cu's bf16 GEMV (one warp a row of w,
// gemv_input.cuh's pipelined row loop), on the same input rows.
template <typename Y, typename Input>
__device__ __forceinline__ void bf16_tail_rows(Input& in, const Bf16Tail<Y>& t, int64_t K) {
    const int64_t n = int64_t(blockIdx.x - t.first_block) * kWarpsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const __nv_bfloat16* row = t.w + (n < t.N ? n : 0) * K;
    const int64_t c = int64_t(lane) * gemv::kInputElems;
    uint4 first[gemv::kBf16Unroll];
#pragma unroll
    for (int u = 0; u < gemv::kBf16Unroll; ++u) // weights: may precede the wait (as the fp8 codes)
        first[u] = c + u * gemv::kBf16Step < K
                       ? __ldcs(reinterpret_cast<const uint4*>(row + c + u * gemv::kBf16Step))
                       : uint4{};
    pdl_wait_and_release();
    in.prepare(K);
    if (n >= t.N) return;
    float acc[Input::kRows] = {};
    gemv::dot_rest_pipelined(in, row, c, K, first, acc);
    store_rows(acc, lane, t.y + n, t.y_stride, false);
}

// implements: y[r, n] (+)= sum_k in[r, k] * e4m3(q[n, k]) * scale[n / Br, k / Bc], r < R, for
// in = x or rms_norm(x) (gemv_input.cuh; block 0 then also stores the normalised rows in h);
// with a tail (blocks from tail.first_block on), also tail.y = in . tail.w^T.
// chosen when: linear_fp8_route gives the GEMV (linear_fp8, rms_norm_linear_fused,
// with a second weight for rms_norm_linear_pair).
// assumes: K % 16 == 0, Bc % 16 == 0; x and q 16-byte aligned, x's row stride a multiple of 8.
// Grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps, warp -> column n, then the
// tail's ceil(tail.N / kWarpsPerBlock).
template <typename Y, typename Input>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kMinBlocks<Input::kRows>)
    gemv_fp8_kernel(Input in, Fp8Rows w, int64_t N, int64_t K, Y* __restrict__ y,
                    int64_t y_stride, bool accumulate, __nv_bfloat16* h_out, int64_t h_stride,
                    Bf16Tail<Y> tail) {
    if (blockIdx.x >= tail.first_block) return bf16_tail_rows(in, tail, K); // block-uniform
    const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const uint32_t nn = uint32_t(n < N ? n : 0); // N < 2^31 (checked on the host)
    const uint8_t* row = w.q + int64_t(nn) * K;
    const float* srow = w.scale + int64_t(nn / w.block_rows) * w.scale_stride;
    int64_t c = int64_t(lane) * kCodesPerLoad;
    ScaleCursor cur{uint32_t(c) / w.block_cols, uint32_t(c) % w.block_cols};
    // Codes and scales are written only while a model loads, never by a kernel in flight, so the
    // first loads may precede the dependency wait (the exception pdl_wait_and_release allows).
    Chunk first[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        first[u] = load_chunk_or_zero(row, srow, c + u * kStep, K, cur, w);
    pdl_wait_and_release();
    in.prepare(K);
    store_input(in, K, h_out, h_stride);
    if (n >= N) return;
    float acc[Input::kRows] = {};
    // Software-pipelined as linear_gemv.cu's dot_rest_pipelined: the next kUnroll chunks are
    // loaded before the current ones are consumed. One row too: with the plain loop of the bf16
    // GEMV, ptxas sinks each load to just before its use here (one load per warp in flight).
    for (; c < K; c += kUnroll * kStep) {
        Chunk next[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            next[u] = load_chunk_or_zero(row, srow, c + (kUnroll + u) * kStep, K, cur, w);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            if (c + u * kStep < K) dot16_rows(in, c + u * kStep, first[u], acc);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) first[u] = next[u];
    }
    store_rows(acc, lane, y + n, y_stride, accumulate);
}

// implements: out[row, k] = bf16(e4m3(q[row, k]) * scale[e, n / Br, k / Bc]) over the rows
// row = e * N + n of a stack [E, N, K] (E = 1 for a 2-D weight), V codes per thread and step
// (16: K % 16 == 0, Bc % 16 == 0, 16-byte aligned q and out; 1 otherwise); rows of experts with
// used[e] == 0 are skipped (used may be null).
// Grid: a grid-stride loop over rows, each row taken by one block (threads stride over K).
template <int V>
__global__ void __launch_bounds__(256)
    dequantize_fp8_kernel(const uint8_t* __restrict__ q, const float* __restrict__ scale,
                          __nv_bfloat16* __restrict__ out, const int32_t* __restrict__ used,
                          uint32_t rows, uint32_t N, int64_t K, uint32_t block_rows,
                          uint32_t block_cols, int64_t scale_rows, int64_t scale_cols) {
    pdl_wait_and_release();
    for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint32_t e = r / N, n = r - e * N;
        if (used && used[e] == 0) continue;
        const float* srow = scale + (int64_t(e) * scale_rows + n / block_rows) * scale_cols;
        const uint8_t* src = q + int64_t(r) * K;
        __nv_bfloat16* dst = out + int64_t(r) * K;
        for (int64_t k = int64_t(threadIdx.x) * V; k < K; k += int64_t(blockDim.x) * V) {
            const float s = __ldg(srow + uint32_t(k) / block_cols);
            if constexpr (V == 16) {
                float v[16];
                fp8x16_to_float(__ldcs(reinterpret_cast<const uint4*>(src + k)), v);
                __nv_bfloat162 packed[8];
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    packed[j] = __floats2bfloat162_rn(v[2 * j] * s, v[2 * j + 1] * s);
                uint4* d = reinterpret_cast<uint4*>(dst + k);
                d[0] = *reinterpret_cast<const uint4*>(&packed[0]);
                d[1] = *reinterpret_cast<const uint4*>(&packed[4]);
            } else {
                dst[k] = __float2bfloat16_rn(fp8_to_float(src[k]) * s);
            }
        }
    }
}

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

} // namespace

bool linear_gemv_fp8_fits(const TensorView& x, const WeightView& w) {
    if (x.ndim != 2 || !w.is_fp8() || w.w.ndim != 2) return false;
    const int64_t T = x.size(0), K = x.size(1);
    return T >= 1 && T <= kGemvMaxRows && x.dtype == DType::BF16 && x.rows_contiguous() &&
           K % kCodesPerLoad == 0 && w.w.size(1) == K && aligned16(x.data) &&
           (T == 1 || x.stride[0] % 8 == 0) && w.block_rows >= 1 && w.block_cols >= kCodesPerLoad &&
           w.block_cols % kCodesPerLoad == 0 && w.block_rows <= kMaxInt32 &&
           w.block_cols <= kMaxInt32 && w.w.size(0) <= kMaxInt32 && K <= kMaxInt32 &&
           aligned16(w.w.data);
}

namespace {

// Launches the fp8 GEMV over `in` (x or rms_norm(x): R = Input::kRows rows) into y, and with a
// BF16 w2, y2 = in . w2^T in the same grid.
template <typename Input>
void launch_gemv_fp8(const ExecContext& ctx, const Input& in, const WeightView& w,
                     const TensorView& y, bool accumulate, __nv_bfloat16* h_out,
                     int64_t h_stride, const TensorView& w2 = {}, const TensorView& y2 = {}) {
    const int64_t N = w.size(0), K = w.size(1);
    const Fp8Rows rows{w.w.ptr<uint8_t>(),
                       w.scale.ptr<float>(),
                       w.scale.stride[0],
                       uint32_t(w.block_rows),
                       uint32_t(w.block_cols),
                       uint32_t(kStep / w.block_cols),
                       uint32_t(kStep % w.block_cols)};
    const auto blocks_for = [](int64_t n) {
        return unsigned((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
    };
    const unsigned blocks = blocks_for(N);
    const int64_t N2 = w2.empty() ? 0 : w2.size(0);
    const size_t smem = Input::smem_bytes(K);
    const auto run = [&](auto* yp, auto* y2p) {
        using Y = std::remove_pointer_t<decltype(yp)>;
        const Bf16Tail<Y> tail{N2 ? w2.ptr<__nv_bfloat16>() : nullptr, N2, y2p,
                               N2 ? y2.stride[0] : 0, blocks};
        launch_pdl(ctx, gemv_fp8_kernel<Y, Input>, blocks + blocks_for(N2), 32 * kWarpsPerBlock,
                   smem, in, rows, N, K, yp, y.stride[0], accumulate, h_out, h_stride, tail);
    };
    if (y.dtype == DType::F32)
        run(y.ptr<float>(), N2 ? y2.ptr<float>() : nullptr);
    else
        run(y.ptr<__nv_bfloat16>(), N2 ? y2.ptr<__nv_bfloat16>() : nullptr);
}

bool gemv_fp8_output_fits(const TensorView& x, const WeightView& w, const TensorView& y) {
    return y.ndim == 2 && y.size(0) == x.size(0) && y.size(1) == w.size(0) &&
           y.rows_contiguous() && (y.dtype == DType::BF16 || y.dtype == DType::F32);
}

} // namespace

void linear_gemv_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                     const TensorView& y, bool accumulate) {
    require(linear_gemv_fp8_fits(x, w), "linear_gemv_fp8: needs BF16 x with 1..", kGemvMaxRows,
            " rows, K % 16 == 0, 16-byte aligned rows and a 2-D fp8 weight with block_cols % 16 "
            "== 0; got ",
            x.describe(), " and ", w.w.describe(), " (blocks ", w.block_rows, "x", w.block_cols,
            ")");
    check_weight("linear_gemv_fp8", "w", w);
    require(gemv_fp8_output_fits(x, w, y), "linear_gemv_fp8: y must be BF16 or F32 [",
            x.size(0), ", ", w.size(0), "] with a contiguous last dim, got ", y.describe());
    if (w.size(0) == 0) return;
    const auto* xp = x.ptr<__nv_bfloat16>();
    with_rows(x.size(0), [&](auto r) {
        const gemv::PlainInput<decltype(r)::value> in{xp, x.stride[0]};
        launch_gemv_fp8(ctx, in, w, y, accumulate, nullptr, 0);
    });
}

namespace {

// A second (BF16) weight w2 [N2, K] and its output y2 [T, N2] (y's dtype) for the tail blocks.
bool bf16_tail_fits(const TensorView& x, const TensorView& y, const TensorView& w2,
                    const TensorView& y2) {
    const int64_t T = x.size(0), K = x.size(1);
    if (w2.empty() && y2.empty()) return true;
    return w2.dtype == DType::BF16 && w2.ndim == 2 && w2.size(0) >= 1 &&
           w2.size(0) <= kMaxInt32 && w2.size(1) == K && w2.rows_contiguous() &&
           w2.stride[0] == K && aligned16(w2.data) && y2.ndim == 2 && y2.dtype == y.dtype &&
           y2.size(0) == T && y2.size(1) == w2.size(0) && y2.rows_contiguous();
}

} // namespace

bool rms_norm_linear_gemv_fp8_fits(const TensorView& x, const TensorView& norm_w,
                                   const WeightView& w, const TensorView& y, const TensorView& h,
                                   const TensorView& w2, const TensorView& y2) {
    const int64_t T = x.size(0), K = x.size(1);
    return linear_gemv_fp8_fits(x, w) && w.size(0) >= 1 && gemv_fp8_output_fits(x, w, y) &&
           norm_w.dtype == DType::BF16 && aligned16(norm_w.data) && h.dtype == DType::BF16 &&
           h.ndim == 2 && h.size(0) == T && h.size(1) == K && h.rows_contiguous() &&
           aligned16(h.data) && (T == 1 || h.stride[0] % 8 == 0) &&
           size_t(T) * size_t(K) * sizeof(__nv_bfloat16) <= gemv::kMaxStagedBytes &&
           bf16_tail_fits(x, y, w2, y2);
}

void rms_norm_linear_gemv_fp8(const ExecContext& ctx, const TensorView& x,
                              const TensorView& norm_w, float eps, const WeightView& w,
                              const TensorView& y, const TensorView& h, const TensorView& w2,
                              const TensorView& y2) {
    require(rms_norm_linear_gemv_fp8_fits(x, norm_w, w, y, h, w2, y2),
            "rms_norm_linear_gemv_fp8: needs the fp8 GEMV's shapes, BF16 norm_w and h with "
            "16-byte aligned rows, ",
            gemv::kMaxStagedBytes,
            " bytes of shared memory for the normalised rows, and a second weight (if any) BF16 "
            "[N2, K], contiguous and 16-byte aligned, with y2 [T, N2] of y's dtype; got ",
            x.describe(), ", ", norm_w.describe(), ", ", w.w.describe(), ", ", y.describe(), ", ",
            h.describe(), ", ", w2.describe(), " and ", y2.describe());
    check_weight("rms_norm_linear_gemv_fp8", "w", w);
    const auto* xp = x.ptr<__nv_bfloat16>();
    const auto* nwp = norm_w.ptr<__nv_bfloat16>();
    with_rows(x.size(0), [&](auto r) {
        const gemv::NormedInput<decltype(r)::value> in{xp, x.stride[0], nwp, eps, x.size(1)};
        launch_gemv_fp8(ctx, in, w, y, false, h.ptr<__nv_bfloat16>(), h.stride[0], w2, y2);
    });
}

void dequantize_fp8(const ExecContext& ctx, const WeightView& w, const TensorView& out,
                    const TensorView& used) {
    constexpr const char* op = "dequantize_fp8";
    require(w.is_fp8() && (w.w.ndim == 2 || w.w.ndim == 3), op,
            ": a 2-D or 3-D fp8 weight expected, got ", w.w.describe());
    check_dequantize_args(op, w, out, used);
    const int nd = w.w.ndim;
    const int64_t E = nd == 3 ? w.size(0) : 1, N = w.size(nd - 2), K = w.size(nd - 1);
    const int64_t rows = E * N;
    if (rows == 0 || K == 0) return;
    require(rows <= kMaxInt32 && w.block_rows <= kMaxInt32 && w.block_cols <= kMaxInt32 &&
                K <= kMaxInt32,
            op, ": ", w.w.describe(), " is too large");
    // 16 codes share one scale when the block columns are a multiple of 16.
    const bool vec =
        K % 16 == 0 && w.block_cols % 16 == 0 && aligned16(w.w.data) && aligned16(out.data);
    const int per_thread = vec ? 16 : 1;
    const int64_t groups = (K + per_thread - 1) / per_thread;
    const int threads = int(std::clamp<int64_t>((groups + 31) / 32 * 32, 32, 256));
    const unsigned grid =
        unsigned(std::min<int64_t>(rows, int64_t(sm_count(ctx)) * (2048 / threads)));
    const auto* q = w.w.ptr<uint8_t>();
    const float* s = w.scale.ptr<float>();
    auto* o = out.ptr<__nv_bfloat16>();
    const int32_t* u = used.empty() ? nullptr : used.ptr<int32_t>();
    const int64_t sr = w.scale.size(nd - 2), sc = w.scale.size(nd - 1);
    const auto kernel = vec ? dequantize_fp8_kernel<16> : dequantize_fp8_kernel<1>;
    launch_pdl(ctx, kernel, grid, threads, 0, q, s, o, u, uint32_t(rows), uint32_t(N), K,
               uint32_t(w.block_rows), uint32_t(w.block_cols), sr, sc);
}

bool linear_tc_fp8_fits(const TensorView& x, const WeightView& w, const TensorView& y) {
    if (x.ndim != 2 || y.ndim != 2 || !grouped_fp8_fits(w) || w.w.ndim != 2) return false;
    const int64_t K = x.size(1), N = w.size(0);
    const int64_t y_align = y.dtype == DType::BF16 ? 4 : 8; // the epilogue's column pairs
    return x.dtype == DType::BF16 && w.size(1) == K && x.rows_contiguous() &&
           x.stride[0] % 8 == 0 && aligned16(x.data) && N % 2 == 0 &&
           (y.dtype == DType::BF16 || y.dtype == DType::F32) && y.rows_contiguous() &&
           y.size(0) == x.size(0) && y.size(1) == N && y.stride[0] % 2 == 0 &&
           reinterpret_cast<uintptr_t>(y.data) % y_align == 0;
}

void linear_tc_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                   const TensorView& y, bool accumulate) {
    require(linear_tc_fp8_fits(x, w, y),
            "linear_tc_fp8: needs BF16 x with 16-byte aligned rows, K % 16 == 0, an even N, "
            "block_cols % 64 == 0 and a BF16 or F32 y with an even row stride; got x ",
            x.describe(), ", w ", w.w.describe(), ", y ", y.describe());
    check_weight("linear_tc_fp8", "w", w);
    const int64_t T = x.size(0);
    GroupedGemm g;
    g.a = x.data;
    g.a_s0 = x.stride[0];
    set_fp8_weight(g, w);
    g.K = x.size(1);
    g.N = w.size(0);
    g.dense_rows = T;
    g.out = y.data;
    g.out_s0 = y.stride[0];
    g.out_bf16 = y.dtype == DType::BF16;
    g.accumulate = accumulate;
    // The smallest tile that holds the rows (32 and 64 keep more weight stages in flight), 128
    // past 64 rows (each weight tile serves twice the rows).
    const int bm = T <= 32 ? 32 : T <= 64 ? 64 : 128;
    g.k_splits = dense_k_splits(ctx, g, bm);
    Tensor partial;
    if (g.k_splits > 1) {
        partial = Tensor::empty(allocator(ctx.device), DType::F32, {g.k_splits, T, g.N});
        g.partial = partial.ptr<float>();
    }
    grouped_down_bf16(ctx, g, bm);
}

Fp8LinearRoute linear_fp8_route(const TensorView& x, const WeightView& w, const TensorView& y) {
    // The order of linear_fp8.h: the GEMV reads one byte a weight but is bound by the CUDA cores
    // from ~5 rows (twice the multiply-adds per byte of bf16); W8A8's fp8 MMAs beat every other
    // route (and bf16's) where its fixed cost is amortized; the tensor-core GEMM on bf16
    // activations reads the codes once per 32-128 row tile; what none takes dequantizes.
    // The route table's kernel (linear.fp8.small / .large, ops/route_table.h) when it takes the
    // shape, else the next of that order that does.
    const int64_t T = x.size(0);
    const RouteId id = w.size(0) * w.size(1) >= kFp8W8a8LargeWeight ? RouteId::LinearFp8Large
                                                                    : RouteId::LinearFp8Small;
    const int preferred = active_route_table().route(id, T);
    const bool gemv = linear_gemv_fp8_fits(x, w);
    if (preferred == kRouteGemv && gemv) return Fp8LinearRoute::Gemv;
    if (preferred == kRouteW8a8 && linear_w8a8_fits(x, w, y)) return Fp8LinearRoute::W8A8;
    if (T <= kFp8TensorCoreMaxRows && linear_tc_fp8_fits(x, w, y))
        return Fp8LinearRoute::TensorCores;
    if (gemv) return Fp8LinearRoute::Gemv;
    return Fp8LinearRoute::Dequantize;
}

void linear_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                const TensorView& y, bool accumulate) {
    require(x.dtype == DType::BF16, "linear: fp8 weights run with BF16 activations on CUDA, got x ",
            x.describe());
    require(w.is_fp8() && w.w.ndim == 2, "linear_fp8: a 2-D fp8 weight expected, got ",
            w.w.describe());
    const int64_t T = x.size(0), N = w.size(0), K = w.size(1);
    if (T == 0 || N == 0) return;
    switch (linear_fp8_route(x, w, y)) {
    case Fp8LinearRoute::Gemv: return linear_gemv_fp8(ctx, x, w, y, accumulate);
    case Fp8LinearRoute::TensorCores: return linear_tc_fp8(ctx, x, w, y, accumulate);
    case Fp8LinearRoute::W8A8:
        if (linear_w8a8(ctx, x, w, y, accumulate)) return;
        // No cuBLASLt algorithm for the shape: the next route of linear_fp8_route's order.
        if (T <= kFp8TensorCoreMaxRows && linear_tc_fp8_fits(x, w, y))
            return linear_tc_fp8(ctx, x, w, y, accumulate);
        break;
    case Fp8LinearRoute::Dequantize: break;
    }
    Tensor dense = Tensor::empty(allocator(ctx.device), DType::BF16, {N, K});
    dequantize_fp8(ctx, w, dense);
    linear_cublas(ctx, x, dense, y, accumulate);
}

} // namespace ninfer::ops::cuda
