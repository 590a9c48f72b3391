// Block-wise fp8 weights on CUDA (ops/cuda/linear_fp8.h, label cuda) against the CPU reference on
// the weight dequantized on the host (e4m3(code) * scale in f32, exact): linear_fp8's GEMV at
// every row count up to kGemvMaxRows, its tensor-core route past it (row tails at the 64- and
// 128-row tiles, partial K tiles, scale blocks of 3..1024 rows and 64..1024 columns, negative
// controls) and the dequantize + cuBLAS route for the shapes neither takes; K and N with
// partial last scale blocks, K shorter than one unrolled step and with a tail past it, square and
// non-square blocks (block columns below, at and above the 512 columns a warp covers per load),
// blocks the GEMV refuses, strided x and y, BF16 and F32 outputs, overwrite and accumulate. And
// dequantize_fp8 bit for bit against the host (NaN codes, the vector and scalar paths, a 3-D
// stack whose unused experts are left untouched).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/fp8_test_util.h"
#include "ops/memory.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/linear.h"

namespace ninfer::test {
namespace {

using ops::cuda::kGemvMaxRows;

// A linear weight: codes of the given kind, scales in [0.001, 0.01].
HostFp8 make_fp8(const std::vector<int64_t>& dims, int64_t br, int64_t bc, uint64_t seed,
                 Fp8Codes codes) {
    return HostFp8(dims, br, bc, seed, codes, 0.001f, 0.01f);
}

struct Case {
    int64_t T, K, N;
    int64_t br = 128, bc = 128;
    bool accumulate = false;
    DType y = DType::BF16;
    Fp8Codes codes = Fp8Codes::Normal;
};

// x and y are column slices of wider tensors when x / y > 0 (row strides K + x and N + y); y's
// padding columns must come back untouched.
struct Pads {
    int64_t x = 0, y = 0;
};

using Route = ops::cuda::Fp8LinearRoute;
const char* route_name(Route r) {
    return r == Route::Gemv          ? "gemv"
           : r == Route::TensorCores ? "tensor_cores"
           : r == Route::W8A8        ? "w8a8"
                                     : "dequantize";
}

std::string describe(const Case& s, Pads pad, Route route) {
    return "T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
           " block=" + std::to_string(s.br) + "x" + std::to_string(s.bc) +
           " accumulate=" + std::to_string(s.accumulate) + " y=" + dtype_name(s.y) +
           " codes=" + std::to_string(int(s.codes)) + " x_pad=" + std::to_string(pad.x) +
           " y_pad=" + std::to_string(pad.y) + " route=" + route_name(route);
}

// Runs linear_fp8 (or, with dispatcher, ops::linear) on the device and the CPU reference on the
// dequantized weight; returns the route that took the shape. The GEMV with an F32 y differs from
// the FP64 reference by f32 accumulation only. The routes past it multiply the weight rounded to
// bf16: against the reference on that rounded weight, the tensor-core route with an F32 y differs
// by f32 accumulation only as well (it forms bf16_rn(code * scale) in shared memory).
// What runs: linear_fp8, the dispatcher (ops::linear), or linear_tc_fp8 itself (its row tiles
// past the rows linear_fp8 gives it).
enum class Call { Fp8, Dispatcher, TensorCores, W8A8 };

Route check_linear_fp8(const Case& s, Pads pad = {}, Call call = Call::Fp8) {
    const bool dispatcher = call == Call::Dispatcher;
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(s.T * 1000003 + s.K * 1009 + s.N * 7 + s.bc);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + pad.x}, seed, 1.0f), DType::BF16);
    const HostFp8 w = make_fp8({s.N, s.K}, s.br, s.bc, seed + 1, s.codes);
    const Tensor dense = w.dense();
    // y's start values about as large as the products, so that a lost accumulate shows.
    Tensor wide_y = rounded(random_tensor({s.T, s.N + pad.y}, seed + 2, 16.0f), s.y);
    const Tensor x_ref = clone(wide_x.view().narrow(1, 0, s.K));
    Tensor ref = clone(wide_y), ref_bf16_w = clone(wide_y), ref_w8a8 = clone(wide_y);
    ops::linear(kCpuRef, x_ref, dense, ref.view().narrow(1, 0, s.N), s.accumulate);
    if (s.K % 128 == 0)
        ops::linear(kCpuRef, w8a8_activations(x_ref), dense, ref_w8a8.view().narrow(1, 0, s.N),
                    s.accumulate);
    ops::linear(kCpuRef, x_ref, rounded(dense, DType::BF16), ref_bf16_w.view().narrow(1, 0, s.N),
                s.accumulate);

    Tensor dwide_x = to_device(c, wide_x, DType::BF16);
    const DeviceFp8 dw(c, w);
    Tensor dwide_y = to_device(c, wide_y, s.y);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K);
    const TensorView dy = dwide_y.view().narrow(1, 0, s.N);
    Route route = ops::cuda::linear_fp8_route(dx, dw.view, dy);
    if (call == Call::TensorCores) {
        if (!ops::cuda::linear_tc_fp8_fits(dx, dw.view, dy)) return Route::Dequantize;
        route = Route::TensorCores;
        ops::cuda::linear_tc_fp8(c, dx, dw.view, dy, s.accumulate);
    } else if (call == Call::W8A8) {
        if (!ops::cuda::linear_w8a8_fits(dx, dw.view, dy)) return Route::Dequantize;
        route = Route::W8A8;
        EXPECT_TRUE(ops::cuda::linear_w8a8(c, dx, dw.view, dy, s.accumulate))
            << "no cuBLASLt algorithm, T=" << s.T << " K=" << s.K << " N=" << s.N;
    } else if (dispatcher) {
        ops::linear(c, dx, dw.view, dy, s.accumulate);
    } else {
        ops::cuda::linear_fp8(c, dx, dw.view, dy, s.accumulate);
    }
    const Tensor out = to_host(c, dwide_y);
    const Tolerance& tol = s.y == DType::BF16     ? kBf16Reduction
                           : route == Route::Gemv ? kCudaF32
                                                  : kBf16Elementwise;
    const std::string what =
        std::string(dispatcher ? "ops::linear " : "linear_fp8 ") + describe(s, pad, route);
    if (route == Route::W8A8) {
        // Against the reference on the quantized activations; the activations' rounding (~2% of
        // each product) must show against the plain reference.
        EXPECT_TRUE(near(out, ref_w8a8, tol)) << what;
        EXPECT_FALSE(near(out, ref, tol)) << "unquantized activations, " << what;
        return route;
    }
    EXPECT_TRUE(near(out, ref, tol)) << what;
    if (route == Route::TensorCores && s.y == DType::F32) {
        EXPECT_TRUE(near(out, ref_bf16_w, kCudaF32)) << "bf16-rounded weight, " << what;
    }
    return route;
}

TEST(CudaLinearFp8, GemvEveryRowCountPartialBlocks) {
    std::vector<int64_t> rows;
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) rows.push_back(T);
    rows.push_back(64);
    for (int64_t T : rows) {
        // Weights under kFp8W8a8LargeWeight: the GEMV to kGemvMaxRows, then tensor cores when
        // K % 16 == 0, block_cols % 64 == 0 and N is even, else dequantize.
        const auto past = [&](bool tensor_cores) {
            return T <= kGemvMaxRows ? Route::Gemv
                   : tensor_cores    ? Route::TensorCores
                                     : Route::Dequantize;
        };
        SCOPED_TRACE("T=" + std::to_string(T));
        // K = 2048: whole 128-column blocks, one unrolled step of 4 x 512 columns per lane.
        // N = 257: not a multiple of the 8 warps (columns) per block; a 1-row last scale block.
        EXPECT_EQ(check_linear_fp8({T, 2048, 257, 128, 128, true, DType::BF16}), past(false));
        // K = 2064 = 16 * 128 + 16: a 16-column last block and a one-load tail past the step.
        EXPECT_EQ(check_linear_fp8({T, 2064, 1000, 128, 128, false, DType::F32}), past(true));
        // K = 272 < one step (17 of the 32 lanes load); N = 130: a 2-row last block.
        EXPECT_EQ(check_linear_fp8({T, 272, 130, 128, 128, true, DType::F32}), past(true));
        // Non-square blocks: 64 x 32 (16 scale columns per 512-column load step).
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 64, 32, false, DType::BF16}), past(false));
        EXPECT_EQ(check_linear_fp8({T, 272, 257, 64, 32, true, DType::F32, Fp8Codes::AnyByte}),
                  past(false));
    }
}

TEST(CudaLinearFp8, BlockShapesAndFallbacks) {
    for (int64_t T : {1, 2, 5, 8}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        // Block columns 16 (the smallest), 48 and 160 (512 % bc != 0: the scale cursor carries a
        // remainder), 1024 (larger than a load step) and 2064 (one block over all of K); block
        // rows 1, 3 and 256 (N = 130: one partial block).
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 1, 16, false, DType::F32}), Route::Gemv);
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 3, 48, true, DType::F32}), Route::Gemv);
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 128, 160, false, DType::BF16}), Route::Gemv);
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 256, 1024, true, DType::F32}), Route::Gemv);
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 7, 2064, false, DType::F32, Fp8Codes::AnyByte}),
                  Route::Gemv);
        // Block columns not a multiple of 16, or K % 16 != 0: dequantize + cuBLAS.
        EXPECT_EQ(check_linear_fp8({T, 2048, 130, 128, 8, true, DType::F32}), Route::Dequantize);
        EXPECT_EQ(check_linear_fp8({T, 2064, 257, 100, 100, false, DType::BF16}),
                  Route::Dequantize);
        EXPECT_EQ(check_linear_fp8({T, 200, 130, 64, 32, true, DType::F32}), Route::Dequantize);
    }
}

TEST(CudaLinearFp8, TensorCoreRouteRowsTailsAndBlocks) {
    // 1 and 8 (rows the GEMV takes in linear_fp8), 9 (one partial 64-row tile), 63/64/65 (the tile
    // edge; 65 takes 128-row tiles), 129 and 200 (a partial second 128-row tile), 300 (3 tiles).
    for (int64_t T : {1, 8, 9, 16, 63, 64, 65, 129, 200, 300}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        const Call tc = Call::TensorCores;
        // K = 2064: a 16-column last K tile of 64; N = 130: a 2-row last N block and scale block.
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 128, 128, true, DType::F32}, {}, tc),
                  Route::TensorCores);
        EXPECT_EQ(check_linear_fp8({T, 272, 1000, 64, 64, false, DType::BF16}, {}, tc),
                  Route::TensorCores);
        // Block rows 3 (many scale rows per N block), block columns 192 (3 K tiles per block).
        EXPECT_EQ(check_linear_fp8({T, 2048, 258, 3, 192, true, DType::F32, Fp8Codes::AnyByte},
                                   {}, tc),
                  Route::TensorCores);
        EXPECT_EQ(check_linear_fp8({T, 1024, 64, 256, 1024, false, DType::F32}, {}, tc),
                  Route::TensorCores);
        // K = 8192: split K (few row tiles and N blocks), partial sums reduced in order.
        EXPECT_EQ(check_linear_fp8({T, 8192, 256, 128, 128, true, DType::BF16}, {}, tc),
                  Route::TensorCores);
    }
    // linear_fp8 gives the tensor cores 9..128 rows, dequantize + cuBLAS past that.
    EXPECT_EQ(check_linear_fp8({128, 2064, 130, 128, 128, true, DType::F32}), Route::TensorCores);
    EXPECT_EQ(check_linear_fp8({129, 2064, 130, 128, 128, true, DType::F32}), Route::Dequantize);
}

TEST(CudaLinearFp8, W8A8RouteRowsAndShapes) {
    const Call w8a8 = Call::W8A8;
    for (int64_t T : {1, 16, 129, 300}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        EXPECT_EQ(check_linear_fp8({T, 2048, 1024, 128, 128, false, DType::BF16}, {}, w8a8),
                  Route::W8A8);
        // N = 1008: a partial last scale row block (112 rows); accumulate.
        EXPECT_EQ(check_linear_fp8({T, 1024, 1008, 128, 128, true, DType::BF16}, {}, w8a8),
                  Route::W8A8);
    }
    // Real shapes at a prefill chunk; strided x and y.
    EXPECT_EQ(check_linear_fp8({512, 5120, 6144, 128, 128, true, DType::BF16}, {}, w8a8),
              Route::W8A8);
    EXPECT_EQ(check_linear_fp8({1000, 2048, 4096, 128, 128, false, DType::BF16}, {}, w8a8),
              Route::W8A8);
    EXPECT_EQ(check_linear_fp8({300, 2048, 1024, 128, 128, true, DType::BF16}, {128, 16}, w8a8),
              Route::W8A8);
    // What it refuses: F32 y, 64 x 64 blocks, K % 128 != 0, N % 16 != 0.
    EXPECT_EQ(check_linear_fp8({300, 2048, 1024, 128, 128, false, DType::F32}, {}, w8a8),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({300, 2048, 1024, 64, 64, false, DType::BF16}, {}, w8a8),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({300, 2064, 1024, 128, 128, false, DType::BF16}, {}, w8a8),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({300, 2048, 1000, 128, 128, false, DType::BF16}, {}, w8a8),
              Route::Dequantize);
}

TEST(CudaLinearFp8, QuantizeRowsMatchesTheHostExactly) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t T = 7, Tp = 8, K = 384, G = K / 128;
    Tensor x = rounded(random_tensor({T, K}, 81, 3.0f), DType::BF16);
    for (int64_t k = 0; k < 128; ++k) x.ptr<float>()[k] = 0.0f; // an all-zero group
    x.ptr<float>()[K + 5] = 8192.0f; // a group with one outlier (a bf16 value)
    const Tensor dx = to_device(c, x, DType::BF16);
    Allocator& a = ops::device_allocator(c.device);
    Tensor codes = Tensor::empty(a, DType::F8E4M3, {Tp, K}), scales = Tensor::empty(a, DType::F32, {G, Tp});
    ops::cuda::quantize_rows_fp8(c, dx, codes, scales);
    Tensor hcodes = Tensor::empty(cpu_allocator(), DType::F8E4M3, {Tp, K});
    ops::synchronize(c);
    ops::download(c, codes, hcodes);
    const Tensor hscales = to_host(c, scales);
    const Tensor expected = w8a8_activations(x);
    Tensor got = zeros({T, K});
    const uint8_t* q = hcodes.ptr<uint8_t>();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k)
            got.ptr<float>()[t * K + k] = model::fp8_e4m3_to_float(q[t * K + k]) *
                                          hscales.ptr<float>()[(k / 128) * Tp + t];
    EXPECT_TRUE(near(got, expected, kExact));
    EXPECT_EQ(hscales.ptr<float>()[0], 1e-12f / 448.0f); // the zero group: row 0, group 0
    for (int64_t k = 0; k < K; ++k) EXPECT_EQ(q[T * K + k], 0) << "padding row, column " << k;
}

TEST(CudaLinearFp8, StridedRows) {
    // Rows 8 elements (16 bytes) apart past K: the GEMV; y strided too.
    EXPECT_EQ(check_linear_fp8({1, 2048, 257, 128, 128, false, DType::BF16}, {8, 0}), Route::Gemv);
    EXPECT_EQ(check_linear_fp8({3, 2064, 130, 128, 128, true, DType::F32}, {24, 5}), Route::Gemv);
    EXPECT_EQ(check_linear_fp8({8, 2064, 257, 64, 32, true, DType::BF16}, {8, 3}), Route::Gemv);
    // Tensor cores with strided x and y (even y strides: the epilogue stores column pairs).
    EXPECT_EQ(check_linear_fp8({9, 2064, 130, 128, 128, false, DType::F32}, {8, 2}),
              Route::TensorCores);
    EXPECT_EQ(check_linear_fp8({40, 2064, 130, 128, 128, true, DType::BF16}, {16, 4}),
              Route::TensorCores);
    EXPECT_EQ(check_linear_fp8({9, 2064, 130, 128, 128, false, DType::F32}, {8, 3}),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({9, 2064, 257, 128, 128, false, DType::F32}, {8, 3}),
              Route::Dequantize);
    // Row stride K + 4: the GEMV refuses two rows or more (unaligned rows), takes a single row.
    EXPECT_EQ(check_linear_fp8({3, 2048, 130, 128, 128, false, DType::BF16}, {4, 0}),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({2, 2048, 130, 128, 128, true, DType::F32}, {4, 7}),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({1, 2048, 130, 128, 128, true, DType::F32}, {4, 0}), Route::Gemv);
    EXPECT_EQ(check_linear_fp8({20, 2048, 130, 128, 128, true, DType::F32}, {4, 0}),
              Route::Dequantize);
}

TEST(CudaLinearFp8, RealShapes) {
    // Qwen3.6-27B FP8 shapes (K, N): an attention projection and the MLP's down projection.
    const std::pair<int64_t, int64_t> shapes[] = {{5120, 6144}, {17408, 5120}};
    for (int64_t T : {1, 4})
        for (auto [K, N] : shapes)
            EXPECT_EQ(check_linear_fp8({T, K, N, 128, 128, T == 1, DType::BF16}), Route::Gemv);
    for (auto [K, N] : shapes) {
        // Large weights: W8A8 from 5 rows; with an F32 y (W8A8 cannot) the tensor cores.
        EXPECT_EQ(check_linear_fp8({16, K, N, 128, 128, true, DType::F32}), Route::TensorCores);
        EXPECT_EQ(check_linear_fp8({5, K, N, 128, 128, true, DType::F32}), Route::TensorCores);
        EXPECT_EQ(check_linear_fp8({8, K, N, 128, 128, false, DType::BF16}), Route::W8A8);
    }
    EXPECT_EQ(check_linear_fp8({136, 5120, 6144, 128, 128, false, DType::BF16}, {}, Call::TensorCores),
              Route::TensorCores);
    EXPECT_EQ(check_linear_fp8({136, 5120, 6144, 128, 128, false, DType::BF16}), Route::W8A8);
}

TEST(CudaLinearFp8, TensorCoreNegativeControls) {
    // The tensor-core result must not match the reference with the scales ignored, or with the
    // second half's rows on the first half's scale rows.
    const auto c = cuda_ctx(DType::BF16);
    const int64_t T = 16, K = 1024, N = 512;
    const Tensor x = rounded(random_tensor({T, K}, 71, 1.0f), DType::BF16);
    const HostFp8 w = make_fp8({N, K}, 128, 128, 72, Fp8Codes::Normal);
    const DeviceFp8 dw(c, w);
    const Tensor dx = to_device(c, x, DType::BF16);
    Tensor dy = to_device(c, zeros({T, N}), DType::F32);
    ASSERT_TRUE(ops::cuda::linear_tc_fp8_fits(dx, dw.view, dy));
    ops::cuda::linear_tc_fp8(c, dx, dw.view, dy, false);
    const Tensor out = to_host(c, dy);
    const auto reference = [&](Dequant mode) {
        Tensor ref = zeros({T, N});
        ops::linear(kCpuRef, x, w.dense(mode), ref, false);
        return ref;
    };
    EXPECT_TRUE(near(out, reference(Dequant::Exact), kBf16Elementwise));
    EXPECT_FALSE(near(out, reference(Dequant::NoScale), kBf16Elementwise));
    EXPECT_FALSE(near(out, reference(Dequant::UpScaleRowFromI), kBf16Elementwise));
}

TEST(CudaLinearFp8, DispatcherTakesTheFp8Routes) {
    const Call d = Call::Dispatcher;
    EXPECT_EQ(check_linear_fp8({1, 2064, 257, 128, 128, true, DType::BF16}, {}, d), Route::Gemv);
    EXPECT_EQ(check_linear_fp8({4, 272, 130, 64, 32, false, DType::F32}, {}, d), Route::Gemv);
    EXPECT_EQ(check_linear_fp8({kGemvMaxRows + 1, 2048, 130, 128, 128, true, DType::BF16}, {}, d),
              Route::TensorCores);
    EXPECT_EQ(check_linear_fp8({kGemvMaxRows + 1, 2048, 257, 128, 128, true, DType::BF16}, {}, d),
              Route::Dequantize);
    EXPECT_EQ(check_linear_fp8({200, 2048, 256, 128, 128, true, DType::BF16}, {}, d), Route::W8A8);
}

TEST(CudaLinearFp8, GemvFitsOnlyItsShapes) {
    const auto c = cuda_ctx(DType::BF16);
    const HostFp8 w = make_fp8({130, 2048}, 128, 128, 7, Fp8Codes::Normal);
    const DeviceFp8 dw(c, w);
    Tensor x = to_device(c, zeros({kGemvMaxRows + 1, 2048 + 16}), DType::BF16);
    const TensorView xv = x.view().narrow(1, 0, 2048);
    for (int64_t T = 1; T <= kGemvMaxRows; ++T)
        EXPECT_TRUE(ops::cuda::linear_gemv_fp8_fits(xv.narrow(0, 0, T), dw.view)) << T;
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xv, dw.view)); // kGemvMaxRows + 1 rows
    // x starting 8 bytes into a row: not 16-byte aligned.
    EXPECT_FALSE(
        ops::cuda::linear_gemv_fp8_fits(x.view().narrow(1, 4, 2048).narrow(0, 0, 1), dw.view));
    // F32 x, a dense weight, block columns not a multiple of 16.
    Tensor xf = to_device(c, zeros({2, 2048}), DType::F32);
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xf, dw.view));
    Tensor dense = to_device(c, w.dense(), DType::BF16);
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xv.narrow(0, 0, 1), dense));
    const ops::WeightView narrow_blocks = ops::WeightView::fp8(dw.codes, dw.scale, 128, 8);
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xv.narrow(0, 0, 1), narrow_blocks));
}

TEST(CudaLinearFp8, RejectsNonBf16Activations) {
    const auto c = cuda_ctx(DType::F32);
    const HostFp8 w = make_fp8({130, 256}, 128, 128, 8, Fp8Codes::Normal);
    const DeviceFp8 dw(c, w);
    Tensor x = to_device(c, zeros({2, 256}), DType::F32);
    Tensor y = to_device(c, zeros({2, 130}), DType::F32);
    EXPECT_THROW(ops::cuda::linear_fp8(c, x, dw.view, y, false), Error);
}

// dequantize_fp8 on a weight of `dims` (2-D or 3-D) against bf16(host dequantization), bit for
// bit; out starts as random bf16 values, which the experts with used[e] == 0 must keep.
void check_dequantize(const std::vector<int64_t>& dims, int64_t br, int64_t bc,
                      const std::vector<int32_t>& used, uint64_t seed) {
    const auto c = cuda_ctx(DType::BF16);
    const HostFp8 w = make_fp8(dims, br, bc, seed, Fp8Codes::WithNan);
    const int nd = int(dims.size());
    const Tensor dense = w.dense();
    const int64_t E = nd == 3 ? dims[0] : 1, per_expert = dense.numel() / E;
    Tensor initial = Tensor::empty(cpu_allocator(), DType::F32, dims.data(), nd);
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < initial.numel(); ++i)
        initial.ptr<float>()[i] = bf16_to_float(float_to_bf16(normal(rng)));
    int64_t nans = 0;
    for (int64_t i = 0; i < dense.numel(); ++i) nans += std::isnan(dense.ptr<float>()[i]);
    ASSERT_GT(nans, 0) << "the weight should hold NaN codes";
    Tensor expected = clone(initial);
    for (int64_t e = 0; e < E; ++e) {
        if (!used.empty() && used[size_t(e)] == 0) continue;
        for (int64_t i = e * per_expert; i < (e + 1) * per_expert; ++i)
            expected.ptr<float>()[i] = bf16_to_float(float_to_bf16(dense.ptr<float>()[i]));
    }
    const DeviceFp8 dw(c, w);
    Tensor out = to_device(c, initial, DType::BF16);
    Tensor dused;
    if (!used.empty()) dused = to_device(c, i32_tensor(used), DType::I32);
    ops::cuda::dequantize_fp8(c, dw.view, out, used.empty() ? TensorView{} : dused.view());
    std::string what = "dims=";
    for (int64_t d : dims) what += std::to_string(d) + ",";
    what += " block=" + std::to_string(br) + "x" + std::to_string(bc) +
            " used=" + std::to_string(used.size());
    EXPECT_TRUE(near(to_host(c, out), expected, kExact)) << what;
}

TEST(CudaLinearFp8, DequantizeMatchesTheHostExactly) {
    // 16 codes a thread (K % 16 == 0), partial last blocks both ways.
    check_dequantize({257, 2064}, 128, 128, {}, 11);
    check_dequantize({130, 272}, 64, 32, {}, 12);
    // One code a thread: K % 16 != 0, or block columns not a multiple of 16.
    check_dequantize({130, 200}, 100, 24, {}, 13);
    check_dequantize({130, 2048}, 128, 8, {}, 18);
    check_dequantize({130, 2048}, 1, 24, {}, 19);
    // Stacks: every expert, then only the used ones (expert 1's rows keep their values).
    check_dequantize({3, 130, 272}, 128, 128, {}, 14);
    check_dequantize({3, 130, 272}, 128, 128, {1, 0, 1}, 15);
    check_dequantize({3, 257, 100}, 64, 32, {1, 0, 1}, 16);
    check_dequantize({3, 130, 272}, 128, 128, {0, 0, 0}, 17);
}

} // namespace
} // namespace ninfer::test
