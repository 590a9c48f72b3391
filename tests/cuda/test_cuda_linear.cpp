// linear's CUDA routes against the CPU reference (label cuda): the GEMV route at every row count up
// to its boundary and one past it (cuBLAS), K that is or is not a multiple of the GEMV's 8-element
// loads and of its unrolled step, N not a multiple of its warps per block, strided x and y rows
// (aligned: GEMV; unaligned: cuBLAS), BF16 and F32 outputs, overwrite and accumulate. The same for
// rms_norm_linear's fused route, and its fallback where the normalised rows do not fit in shared
// memory. Outputs whose rows are not 16-byte multiples at prefill row counts.
#include <string>
#include <utility>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/linear.h"
#include "ops/rms_norm.h"

namespace ninfer::test {
namespace {

using ops::cuda::kGemvMaxRows;

struct Shape {
    int64_t T, K, N;
};

// x and y are column slices of wider tensors when x_pad / y_pad > 0 (row strides K + x_pad and
// N + y_pad); y's padding columns must come back untouched.
struct Pads {
    int64_t x = 0, y = 0;
};

// Runs linear on the device and on the CPU reference, and the GEMV kernel itself whenever it fits
// (linear may still prefer cuBLAS: gemv_preferred); returns whether the GEMV fits.
bool check_linear(const Shape& s, bool accumulate, DType y_dtype, Pads pad = {}) {
    const auto c = cuda_ctx(DType::BF16);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + pad.x}, 40, 1.0f), DType::BF16);
    Tensor w = rounded(random_tensor({s.N, s.K}, 41, 0.02f), DType::BF16);
    Tensor wide_y = rounded(random_tensor({s.T, s.N + pad.y}, 42, 1.0f), y_dtype);
    Tensor ref = clone(wide_y);
    ops::linear(kCpuRef, clone(wide_x.view().narrow(1, 0, s.K)), w, ref.view().narrow(1, 0, s.N),
                accumulate);
    Tensor dwide_x = to_device(c, wide_x, DType::BF16), dw = to_device(c, w, DType::BF16);
    Tensor dwide_y = to_device(c, wide_y, y_dtype);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K);
    ops::linear(c, dx, dw, dwide_y.view().narrow(1, 0, s.N), accumulate);
    const bool gemv = ops::cuda::linear_gemv_fits(dx, dw);
    const Tolerance& tol = y_dtype == DType::F32 ? kBf16Elementwise : kBf16Reduction;
    const auto where = [&](const char* route) {
        return std::string(route) + ": T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) +
               " N=" + std::to_string(s.N) + " x_pad=" + std::to_string(pad.x) +
               " y_pad=" + std::to_string(pad.y) + " accumulate=" + std::to_string(accumulate) +
               " y=" + dtype_name(y_dtype) + " gemv=" + std::to_string(gemv);
    };
    EXPECT_TRUE(near(to_host(c, dwide_y), ref, tol)) << where("linear");
    if (gemv) {
        Tensor direct = to_device(c, wide_y, y_dtype);
        ops::cuda::linear_gemv(c, dx, dw, direct.view().narrow(1, 0, s.N), accumulate);
        EXPECT_TRUE(near(to_host(c, direct), ref, tol)) << where("linear_gemv");
    }
    return gemv;
}

TEST(CudaLinear, GemvRouteEveryRowCountAndBoundary) {
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) {
        const bool gemv = T <= kGemvMaxRows;
        SCOPED_TRACE("T=" + std::to_string(T));
        // N = 257, 1000, 33: not multiples of the 8 warps (columns) per block.
        EXPECT_EQ(check_linear({T, 2048, 257}, true, DType::BF16), gemv);
        EXPECT_EQ(check_linear({T, 512, 1000}, false, DType::F32), gemv);
        // K = 8 * 257: one chunk past two unrolled steps (1024 elements each), a tail.
        EXPECT_EQ(check_linear({T, 2056, 33}, true, DType::F32), gemv);
        // K shorter than one unrolled step: some lanes load nothing.
        EXPECT_EQ(check_linear({T, 264, 40}, false, DType::BF16), gemv);
    }
}

// cuBLAS with output rows that are not 16-byte multiples (the router's E + 1 = 257 columns) at
// prefill row counts: overwrite and accumulate, a y slice whose 3 padding columns must come back
// untouched, bf16 and f32 rows.
TEST(CudaLinear, MisalignedOutputRowsAtPrefillRowCounts) {
    for (int64_t T : {255, 256, 300})
        for (bool accumulate : {false, true}) {
            SCOPED_TRACE("T=" + std::to_string(T));
            check_linear({T, 2048, 257}, accumulate, DType::BF16);        // row stride 257
            check_linear({T, 512, 257}, accumulate, DType::BF16, {0, 3}); // 260
            check_linear({T, 512, 130}, accumulate, DType::F32, {8, 1});  // 131
        }
}

TEST(CudaLinear, GemvPreferredFollowsTheMeasuredTable) {
    using ops::cuda::gemv_preferred;
    constexpr int64_t kMiB = int64_t(1) << 20;
    EXPECT_TRUE(gemv_preferred(1, 1024 * kMiB)); // one row: always
    EXPECT_TRUE(gemv_preferred(2, 16 * kMiB));   // 35B GDN out_proj
    EXPECT_FALSE(gemv_preferred(2, 16 * kMiB + 1));
    EXPECT_TRUE(gemv_preferred(4, 4 * kMiB)); // shared expert gate_up
    EXPECT_FALSE(gemv_preferred(4, 16 * kMiB));
    EXPECT_TRUE(gemv_preferred(8, 257 * 2048 * 2)); // router
    EXPECT_FALSE(gemv_preferred(8, 2 * kMiB));      // shared expert down
}

TEST(CudaLinear, RealDecodeShapes) {
    // 35B-A3B GDN in_proj and out_proj, router, shared expert; 27B MLP down. One row (decode),
    // and 2, 4, 8 rows (speculative verification, small batches).
    const std::pair<int64_t, int64_t> shapes[] = {
        {2048, 12352}, {4096, 2048}, {2048, 257}, {512, 2048}, {17408, 5120}}; // K, N
    for (int64_t T : {1, 2, 4, 8})
        for (auto [K, N] : shapes)
            EXPECT_EQ(check_linear({T, K, N}, N == 2048, N == 257 ? DType::F32 : DType::BF16),
                      T <= kGemvMaxRows);
}

TEST(CudaLinear, TailsStridesAndUnalignedK) {
    const auto fits = [](int64_t T) { return T <= kGemvMaxRows; };
    // Column slices of wider rows, strides multiples of 8 elements (16 bytes): GEMV; y strided.
    EXPECT_TRUE(check_linear({1, 2048, 64}, false, DType::BF16, {24, 0}));
    EXPECT_EQ(check_linear({4, 2048, 64}, false, DType::BF16, {24, 5}), fits(4));
    EXPECT_EQ(check_linear({8, 2056, 71}, true, DType::F32, {8, 3}), fits(8));
    EXPECT_EQ(check_linear({2, 264, 40}, true, DType::BF16, {16, 1}), fits(2));
    // x rows 4 elements (8 bytes) apart: the GEMV refuses them; cuBLAS computes them.
    EXPECT_FALSE(check_linear({3, 2048, 64}, false, DType::BF16, {4, 0}));
    EXPECT_FALSE(check_linear({2, 2048, 64}, true, DType::F32, {4, 7}));
    // A single row needs no row stride: GEMV whatever the padding.
    EXPECT_TRUE(check_linear({1, 2048, 64}, false, DType::BF16, {4, 0}));
    // K % 8 != 0: cuBLAS.
    EXPECT_FALSE(check_linear({1, 100, 31}, true, DType::BF16));
    EXPECT_FALSE(check_linear({2, 100, 31}, true, DType::F32));
}

// rms_norm_linear: fused up to kGemvMaxRows rows when the normalised rows fit in shared memory
// (the GEMV normalises x itself and block 0 writes h), two ops otherwise; h (with its padding
// columns) and y both compared with the CPU reference, through rms_norm_linear and, whenever it
// fits, through the fused kernel itself. Returns whether the fused route fits.
bool check_norm_linear(const Shape& s, DType y_dtype, Pads pad = {}, int64_t h_pad = 0) {
    const auto c = cuda_ctx(DType::BF16);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + pad.x}, 43, 3.0f), DType::BF16);
    Tensor nw = rounded(random_tensor({s.K}, 44, 0.2f), DType::BF16);
    Tensor w = rounded(random_tensor({s.N, s.K}, 45, 0.02f), DType::BF16);
    Tensor ref_y = zeros({s.T, s.N + pad.y}), ref_h = zeros({s.T, s.K + h_pad});
    ops::rms_norm_linear(kCpuRef, wide_x.view().narrow(1, 0, s.K), nw, 1e-6f, w,
                         ref_y.view().narrow(1, 0, s.N), ref_h.view().narrow(1, 0, s.K));
    Tensor dwide_x = to_device(c, wide_x, DType::BF16), dnw = to_device(c, nw, DType::BF16);
    Tensor dw = to_device(c, w, DType::BF16);
    Tensor dy = to_device(c, zeros({s.T, s.N + pad.y}), y_dtype);
    Tensor dh = to_device(c, zeros({s.T, s.K + h_pad}), DType::BF16);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K), h = dh.view().narrow(1, 0, s.K);
    ops::rms_norm_linear(c, dx, dnw, 1e-6f, dw, dy.view().narrow(1, 0, s.N), h);
    const bool fused = ops::cuda::rms_norm_linear_gemv_fits(dx, dnw, dw, h);
    EXPECT_TRUE(near(to_host(c, dh), ref_h, kBf16Elementwise))
        << "h: T=" << s.T << " K=" << s.K << " fused=" << fused;
    EXPECT_TRUE(near(to_host(c, dy), ref_y, kBf16Reduction))
        << "y: T=" << s.T << " K=" << s.K << " N=" << s.N << " fused=" << fused;
    if (fused) {
        Tensor dy2 = to_device(c, zeros({s.T, s.N + pad.y}), y_dtype);
        Tensor dh2 = to_device(c, zeros({s.T, s.K + h_pad}), DType::BF16);
        ops::cuda::rms_norm_linear_gemv(c, dx, dnw, 1e-6f, dw, dy2.view().narrow(1, 0, s.N),
                                        dh2.view().narrow(1, 0, s.K));
        EXPECT_TRUE(near(to_host(c, dh2), ref_h, kBf16Elementwise)) << "kernel h: T=" << s.T;
        EXPECT_TRUE(near(to_host(c, dy2), ref_y, kBf16Reduction))
            << "kernel y: T=" << s.T << " K=" << s.K << " N=" << s.N;
    }
    return fused;
}

TEST(CudaLinear, RmsNormLinearEveryRowCountAndBoundary) {
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) {
        const bool fused = T <= kGemvMaxRows; // K = 2048 stages 8 rows, K = 264 more
        SCOPED_TRACE("T=" + std::to_string(T));
        EXPECT_EQ(check_norm_linear({T, 2048, 300}, DType::BF16), fused);
        EXPECT_EQ(check_norm_linear({T, 2048, 257}, DType::F32), fused); // router
        EXPECT_EQ(check_norm_linear({T, 264, 40}, DType::BF16), fused);  // K < one unrolled step
        EXPECT_EQ(check_norm_linear({T, 2056, 33}, DType::F32), fused);  // tail past the unroll
        // x, y and h column slices of wider rows (x and h strides multiples of 8 elements).
        EXPECT_EQ(check_norm_linear({T, 2048, 65}, DType::BF16, {8, 3}, 16), fused);
    }
}

TEST(CudaLinear, RmsNormLinearRealShapesAndFallback) {
    EXPECT_TRUE(check_norm_linear({1, 2048, 12352}, DType::BF16)); // 35B GDN in_proj
    EXPECT_TRUE(check_norm_linear({1, 5120, 1000}, DType::BF16));
    // K = 5120: 4 normalised rows (40 KB) fit in shared memory, 8 (80 KB) do not: two ops.
    EXPECT_EQ(check_norm_linear({4, 5120, 1000}, DType::BF16), kGemvMaxRows >= 4);
    EXPECT_FALSE(check_norm_linear({8, 5120, 1000}, DType::BF16));
    EXPECT_FALSE(check_norm_linear({8, 5120, 1000}, DType::F32, {8, 0}, 8));
    // Unaligned x or h row strides: two ops.
    EXPECT_FALSE(check_norm_linear({3, 2048, 300}, DType::BF16, {4, 0}));
    EXPECT_FALSE(check_norm_linear({3, 2048, 300}, DType::BF16, {}, 4));
}

// A serving step at --max-batch-tokens 65536 through the bf16 linear route (cuBLAS past the GEMV
// rows) at the 35B's projection shapes: GDN in_proj (K 2048, N 12,352), the gated q_proj (8,192),
// o_proj and GDN out_proj (K 4,096), the shared expert's gate/up and down, and the f32 router.
// Every output must be finite and sampled rows must match the FP64 reference (see
// CudaMoeWgmma.Qwen35bExpertsAtAFullBudgetStep for the failure this hunts).
TEST(CudaLinear, Qwen35bProjectionsAtAFullBudgetStep) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t T = 65536, n = 64;
    struct Projection {
        int64_t K, N;
        DType out;
    };
    for (Projection s : {Projection{2048, 12352, DType::BF16}, {2048, 8192, DType::BF16},
                    {4096, 2048, DType::BF16}, {2048, 1024, DType::BF16},
                    {512, 2048, DType::BF16}, {2048, 256, DType::F32}}) {
        SCOPED_TRACE("K=" + std::to_string(s.K) + " N=" + std::to_string(s.N));
        const Tensor x = rounded(random_tensor({T, s.K}, 40), DType::BF16);
        const Tensor w = rounded(random_tensor({s.N, s.K}, 41, 0.02f), DType::BF16);
        Tensor dy = to_device(c, zeros({T, s.N}), s.out);
        ops::linear(c, to_device(c, x, DType::BF16), to_device(c, w, DType::BF16), dy, false);
        const Tensor got = to_host(c, dy);
        EXPECT_TRUE(all_finite(got, s.N));
        for (int64_t begin : {int64_t(0), T / 2, T - n}) {
            Tensor ref = zeros({n, s.N});
            ops::linear(kCpuRef, rows(x, begin, n), w, ref, false);
            EXPECT_TRUE(near(rows(got, begin, n), ref,
                             s.out == DType::F32 ? kBf16Elementwise : kBf16Reduction))
                << "rows from " << begin;
        }
    }
}

} // namespace
} // namespace ninfer::test
