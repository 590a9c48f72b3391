// rms_norm_linear with a block-wise fp8 weight on CUDA (label cuda): the fp8 GEMV with the norm
// folded in (rms_norm_linear_gemv_fp8: each block normalises x into shared memory, block 0 writes
// h) wherever linear_fp8 takes the GEMV, the two ops elsewhere. h and y are compared with the
// CPU reference (rms_norm, then linear on the weight dequantized on the host, exactly), through
// ops::rms_norm_linear and, wherever it fits, through the fused kernel itself: every row count,
// partial scale blocks, K shorter than one unrolled step and with a tail past it, the 35B's GDN
// in_proj shape, strided x, y and h, BF16 and F32 y, and the shapes that fall back (rows past
// the GEMV, normalised rows past the shared memory, unaligned strides). The negative control: y
// of the un-normalised x must not pass the same check. And rms_norm_linear_pair, a BF16 second
// weight's rows run as extra blocks of the same kernel (the fp8 GDN in_proj with in_proj_ba),
// its output columns beside the first's as in the model.
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/fp8_test_util.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/linear.h"

namespace ninfer::test {
namespace {

using ops::cuda::kGemvMaxRows;

struct Case {
    int64_t T, K, N;
    int64_t br = 128, bc = 128;
    DType y = DType::BF16;
};

struct Pads { // x, y and h as column slices of wider rows
    int64_t x = 0, y = 0, h = 0;
};

std::string describe(const Case& s, Pads pad) {
    return "T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
           " block=" + std::to_string(s.br) + "x" + std::to_string(s.bc) +
           " y=" + dtype_name(s.y) + " pads=" + std::to_string(pad.x) + "/" +
           std::to_string(pad.y) + "/" + std::to_string(pad.h);
}

// Returns whether the fused kernel took the shape.
bool check_norm_linear_fp8(const Case& s, Pads pad = {}) {
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(s.T * 7919 + s.K * 31 + s.N);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + pad.x}, seed, 3.0f), DType::BF16);
    Tensor nw = rounded(random_tensor({s.K}, seed + 1, 0.2f), DType::BF16);
    const HostFp8 w({s.N, s.K}, s.br, s.bc, seed + 2, Fp8Codes::Normal, 0.001f, 0.01f);
    const Tensor dense = w.dense();
    const TensorView x_ref = wide_x.view().narrow(1, 0, s.K);
    Tensor ref_y = zeros({s.T, s.N + pad.y}), ref_h = zeros({s.T, s.K + pad.h});
    ops::rms_norm_linear(kCpuRef, x_ref, nw, 1e-6f, dense, ref_y.view().narrow(1, 0, s.N),
                         ref_h.view().narrow(1, 0, s.K));
    Tensor plain_y = zeros({s.T, s.N + pad.y}); // the negative control: no norm
    ops::linear(kCpuRef, x_ref, dense, plain_y.view().narrow(1, 0, s.N));
    // Past the GEMV, W8A8 (sm_90) multiplies h quantized per 128 columns: y's reference then
    // takes the same quantization of the (bf16) normalised rows.
    Tensor w8a8_y = zeros({s.T, s.N + pad.y});
    if (s.K % 128 == 0)
        ops::linear(kCpuRef,
                    w8a8_activations(rounded(ref_h.view().narrow(1, 0, s.K), DType::BF16)),
                    dense, w8a8_y.view().narrow(1, 0, s.N));

    Tensor dwide_x = to_device(c, wide_x, DType::BF16), dnw = to_device(c, nw, DType::BF16);
    const DeviceFp8 dw(c, w);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K);
    const auto run = [&](bool kernel) {
        Tensor dy = to_device(c, zeros({s.T, s.N + pad.y}), s.y);
        Tensor dh = to_device(c, zeros({s.T, s.K + pad.h}), DType::BF16);
        const TensorView y = dy.view().narrow(1, 0, s.N), h = dh.view().narrow(1, 0, s.K);
        if (kernel)
            ops::cuda::rms_norm_linear_gemv_fp8(c, dx, dnw, 1e-6f, dw.view, y, h);
        else
            ops::rms_norm_linear(c, dx, dnw, 1e-6f, dw.view, y, h);
        return std::pair{to_host(c, dy), to_host(c, dh)};
    };
    Tensor probe_y = to_device(c, zeros({s.T, s.N + pad.y}), s.y);
    Tensor probe_h = to_device(c, zeros({s.T, s.K + pad.h}), DType::BF16);
    const TensorView py = probe_y.view().narrow(1, 0, s.N), ph = probe_h.view().narrow(1, 0, s.K);
    const auto route = ops::cuda::linear_fp8_route(dx, dw.view, py);
    const bool fused = route == ops::cuda::Fp8LinearRoute::Gemv &&
                       ops::cuda::rms_norm_linear_gemv_fp8_fits(dx, dnw, dw.view, py, ph);
    const Tensor& expect_y = route == ops::cuda::Fp8LinearRoute::W8A8 ? w8a8_y : ref_y;
    const std::string what = describe(s, pad) + " fused=" + std::to_string(fused) +
                             " route=" + std::to_string(int(route));
    for (bool kernel : {false, true}) {
        if (kernel && !fused) break;
        const auto [y, h] = run(kernel);
        const char* via = kernel ? "kernel " : "rms_norm_linear ";
        EXPECT_TRUE(near(h, ref_h, kBf16Elementwise)) << via << "h: " << what;
        EXPECT_TRUE(near(y, expect_y, kBf16Reduction)) << via << "y: " << what;
        EXPECT_FALSE(near(y, plain_y, kBf16Reduction)) << via << "y without the norm: " << what;
    }
    return fused;
}

TEST(CudaNormLinearFp8, EveryRowCountAndBoundary) {
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) {
        // Small weights: the GEMV to kGemvMaxRows rows (K = 2048 stages 8 normalised rows).
        const bool fused = T <= kGemvMaxRows;
        SCOPED_TRACE("T=" + std::to_string(T));
        EXPECT_EQ(check_norm_linear_fp8({T, 2048, 300}), fused);
        EXPECT_EQ(check_norm_linear_fp8({T, 2048, 257, 128, 128, DType::F32}), fused); // odd N
        EXPECT_EQ(check_norm_linear_fp8({T, 272, 40, 64, 64}), fused); // K < one unrolled step
        EXPECT_EQ(check_norm_linear_fp8({T, 2064, 33, 3, 48, DType::F32}), fused); // tails
        EXPECT_EQ(check_norm_linear_fp8({T, 2048, 65}, {8, 3, 16}), fused); // strided x, y, h
    }
}

TEST(CudaNormLinearFp8, RealShapesAndFallback) {
    EXPECT_TRUE(check_norm_linear_fp8({1, 2048, 12288})); // 35B GDN in_proj (qkv | z)
    EXPECT_TRUE(check_norm_linear_fp8({1, 5120, 1000}));  // the 27B's hidden size
    // K = 5120: 4 normalised rows (40 KB) fit in shared memory, 8 (80 KB) do not: two ops.
    EXPECT_TRUE(check_norm_linear_fp8({4, 5120, 1000}));
    EXPECT_FALSE(check_norm_linear_fp8({8, 5120, 1000}));
    // A weight of kFp8W8a8LargeWeight elements past kFp8GemvRows rows: linear_fp8 leaves the
    // GEMV, and so does the fused route.
    EXPECT_TRUE(check_norm_linear_fp8({ops::cuda::kFp8GemvRows, 2048, 8192}));
    EXPECT_FALSE(check_norm_linear_fp8({ops::cuda::kFp8GemvRows + 1, 2048, 8192}));
    // Unaligned x or h row strides (4 elements: 8 bytes): two ops.
    EXPECT_FALSE(check_norm_linear_fp8({3, 2048, 300}, {4, 0, 0}));
    EXPECT_FALSE(check_norm_linear_fp8({3, 2048, 300}, {0, 0, 4}));
}

// rms_norm_linear_pair: y and y2 column ranges of one output (the model's proj: qkv | z | b | a),
// against the CPU reference; returns whether the one kernel took it.
bool check_pair(int64_t T, int64_t K, int64_t N, int64_t N2, DType y_dtype) {
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(T * 131 + K * 17 + N + N2);
    Tensor x = rounded(random_tensor({T, K}, seed, 3.0f), DType::BF16);
    Tensor nw = rounded(random_tensor({K}, seed + 1, 0.2f), DType::BF16);
    const HostFp8 w({N, K}, 128, 128, seed + 2, Fp8Codes::Normal, 0.001f, 0.01f);
    Tensor w2 = rounded(random_tensor({N2, K}, seed + 3, 0.02f), DType::BF16);
    const Tensor dense = w.dense();
    Tensor ref = zeros({T, N + N2}), ref_h = zeros({T, K}), plain = zeros({T, N2});
    ops::rms_norm_linear_pair(kCpuRef, x, nw, 1e-6f, dense, ref.view().narrow(1, 0, N), w2,
                              ref.view().narrow(1, N, N2), ref_h);
    ops::linear(kCpuRef, x, w2, plain); // the negative control: no norm
    // Where linear_fp8 takes W8A8 (past kFp8GemvRows rows on large weights, sm_90), y's
    // reference multiplies the normalised rows quantized as it quantizes them.
    Tensor ref_w8a8 = clone(ref);
    if (K % 128 == 0)
        ops::linear(kCpuRef, w8a8_activations(rounded(ref_h, DType::BF16)), dense,
                    ref_w8a8.view().narrow(1, 0, N));

    Tensor dx = to_device(c, x, DType::BF16), dnw = to_device(c, nw, DType::BF16);
    Tensor dw2 = to_device(c, w2, DType::BF16);
    const DeviceFp8 dw(c, w);
    Tensor dout = to_device(c, zeros({T, N + N2}), y_dtype);
    Tensor dh = to_device(c, zeros({T, K}), DType::BF16);
    const TensorView y = dout.view().narrow(1, 0, N), y2 = dout.view().narrow(1, N, N2);
    const auto route = ops::cuda::linear_fp8_route(dx, dw.view, y);
    const bool fused = route == ops::cuda::Fp8LinearRoute::Gemv &&
                       ops::cuda::rms_norm_linear_gemv_fp8_fits(dx, dnw, dw.view, y, dh, dw2, y2);
    const Tensor& expect = route == ops::cuda::Fp8LinearRoute::W8A8 ? ref_w8a8 : ref;
    ops::rms_norm_linear_pair(c, dx, dnw, 1e-6f, dw.view, y, dw2, y2, dh);
    const Tensor out = to_host(c, dout);
    const std::string what = "T=" + std::to_string(T) + " K=" + std::to_string(K) +
                             " N=" + std::to_string(N) + " N2=" + std::to_string(N2) +
                             " y=" + dtype_name(y_dtype) + " fused=" + std::to_string(fused) +
                             " route=" + std::to_string(int(route));
    EXPECT_TRUE(near(to_host(c, dh), ref_h, kBf16Elementwise)) << "h: " << what;
    EXPECT_TRUE(near(out, expect, kBf16Reduction)) << "y | y2: " << what;
    EXPECT_FALSE(near(clone(out.view().narrow(1, N, N2)), plain, kBf16Reduction))
        << "y2 without the norm: " << what;
    return fused;
}

TEST(CudaNormLinearFp8, PairWithABf16SecondWeight) {
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) {
        SCOPED_TRACE("T=" + std::to_string(T));
        // The 35B's GDN in_proj (25 M elements): the fp8 GEMV to kFp8GemvRows rows, then W8A8
        // (sm_90) or tensor cores, and the two calls; small weights: the GEMV to kGemvMaxRows.
        EXPECT_EQ(check_pair(T, 2048, 12288, 64, DType::BF16), T <= ops::cuda::kFp8GemvRows);
        EXPECT_EQ(check_pair(T, 272, 40, 9, DType::F32), T <= kGemvMaxRows); // K, N2 < a block
    }
    EXPECT_TRUE(check_pair(1, 5120, 1000, 96, DType::BF16)); // the 27B's hidden size
}

} // namespace
} // namespace ninfer::test
