// linear's CUDA routes against the CPU reference (label cuda): the GEMV route up to its row
// boundary and one past it (cuBLAS), K that is or is not a multiple of the GEMV's 8-element
// loads, strided x rows, BF16 and F32 outputs, overwrite and accumulate.
#include "cuda/cuda_test_util.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/linear.h"
#include "ops/rms_norm.h"

namespace ninfer::test {
namespace {

struct Shape {
    int64_t T, K, N;
};

// x is a column slice of a wider tensor when x_pad > 0 (row stride K + x_pad).
void check_linear(const Shape& s, int64_t x_pad, bool accumulate, DType y_dtype) {
    const auto c = cuda_ctx(DType::BF16);
    Tensor wide = rounded(random_tensor({s.T, s.K + x_pad}, 40, 1.0f), DType::BF16);
    Tensor w = rounded(random_tensor({s.N, s.K}, 41, 0.02f), DType::BF16);
    Tensor y0 = rounded(random_tensor({s.T, s.N}, 42, 1.0f), y_dtype);
    Tensor ref = clone(y0);
    TensorView x = wide.view().narrow(1, 0, s.K);
    ops::linear(kCpuRef, clone(x), w, ref, accumulate);
    Tensor dwide = to_device(c, wide, DType::BF16), dw = to_device(c, w, DType::BF16);
    Tensor dy = to_device(c, y0, y_dtype);
    TensorView dx = dwide.view().narrow(1, 0, s.K);
    ops::linear(c, dx, dw, dy, accumulate);
    const Tolerance& tol = y_dtype == DType::F32 ? kBf16Elementwise : kBf16Reduction;
    EXPECT_TRUE(near(to_host(c, dy), ref, tol))
        << "T=" << s.T << " K=" << s.K << " N=" << s.N << " pad=" << x_pad
        << " accumulate=" << accumulate << " y=" << dtype_name(y_dtype)
        << " gemv=" << ops::cuda::linear_gemv_fits(dx, dw);
}

TEST(CudaLinear, GemvRouteEveryRowCountAndBoundary) {
    for (int64_t T = 1; T <= ops::cuda::kGemvMaxRows + 1; ++T) {
        check_linear({T, 2048, 257}, 0, true, DType::BF16);
        check_linear({T, 512, 1000}, 0, false, DType::F32);
    }
}

TEST(CudaLinear, RealDecodeShapes) {
    // 35B-A3B GDN in_proj and out_proj, router, shared expert; 27B MLP down.
    for (Shape s :
         {Shape{1, 2048, 12352}, {1, 4096, 2048}, {1, 2048, 257}, {1, 512, 2048}, {2, 17408, 5120}})
        check_linear(s, 0, s.N == 2048, s.N == 257 ? DType::F32 : DType::BF16);
}

TEST(CudaLinear, TailsStridesAndUnalignedK) {
    check_linear({1, 2056, 33}, 0, true, DType::BF16);   // K = 8 * 257: tail loop past the unroll
    check_linear({1, 264, 40}, 0, false, DType::BF16);   // K shorter than one unrolled step
    check_linear({1, 2048, 64}, 24, false, DType::BF16); // a column slice of a wider row: GEMV
    check_linear({3, 2048, 64}, 4, false, DType::BF16);  // strided rows: cuBLAS
    check_linear({1, 100, 31}, 0, true, DType::BF16);    // K % 8 != 0: cuBLAS
    check_linear({2, 100, 31}, 0, true, DType::F32);
}

// rms_norm_linear: fused at one row (the GEMV normalises x itself and block 0 writes h), two ops
// otherwise; h and y both compared with the CPU reference.
void check_norm_linear(int64_t T, int64_t K, int64_t N, DType y_dtype) {
    const auto c = cuda_ctx(DType::BF16);
    Tensor x = rounded(random_tensor({T, K}, 43, 3.0f), DType::BF16);
    Tensor nw = rounded(random_tensor({K}, 44, 0.2f), DType::BF16);
    Tensor w = rounded(random_tensor({N, K}, 45, 0.02f), DType::BF16);
    Tensor ref_y = zeros({T, N}), ref_h = zeros({T, K});
    ops::rms_norm_linear(kCpuRef, x, nw, 1e-6f, w, ref_y, ref_h);
    Tensor dx = to_device(c, x, DType::BF16), dnw = to_device(c, nw, DType::BF16);
    Tensor dw = to_device(c, w, DType::BF16), dy = to_device(c, zeros({T, N}), y_dtype);
    Tensor dh = to_device(c, zeros({T, K}), DType::BF16);
    ops::rms_norm_linear(c, dx, dnw, 1e-6f, dw, dy, dh);
    EXPECT_TRUE(near(to_host(c, dh), ref_h, kBf16Elementwise)) << "h: T=" << T << " K=" << K;
    EXPECT_TRUE(near(to_host(c, dy), ref_y, kBf16Reduction)) << "y: T=" << T << " N=" << N;
}

TEST(CudaLinear, RmsNormLinearFusedAndUnfused) {
    check_norm_linear(1, 2048, 12352, DType::BF16); // 35B GDN in_proj
    check_norm_linear(1, 2048, 257, DType::F32);    // router
    check_norm_linear(1, 5120, 1000, DType::BF16);
    check_norm_linear(1, 264, 40, DType::BF16);   // K shorter than one unrolled step
    check_norm_linear(3, 2048, 300, DType::BF16); // two ops
}

} // namespace
} // namespace ninfer::test
