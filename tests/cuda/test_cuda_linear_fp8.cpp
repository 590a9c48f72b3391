// Block-wise fp8 weights on CUDA (ops/cuda/linear_fp8.h, label cuda) against the CPU reference on
// the weight dequantized on the host (e4m3(code) * scale in f32, exact): linear_fp8's GEMV at
// every row count up to kGemvMaxRows and its dequantize + cuBLAS route past it; K and N with
// partial last scale blocks, K shorter than one unrolled step and with a tail past it, square and
// non-square blocks (block columns below, at and above the 512 columns a warp covers per load),
// blocks the GEMV refuses, strided x and y, BF16 and F32 outputs, overwrite and accumulate. And
// dequantize_fp8 bit for bit against the host (NaN codes, the vector and scalar paths, a 3-D
// stack whose unused experts are left untouched).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/fp8.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/linear.h"

namespace ninfer::test {
namespace {

using ops::cuda::kGemvMaxRows;

// A host fp8 weight [.., N, K] and its exact dequantization.
struct HostFp8 {
    Tensor codes; // F8E4M3
    Tensor scale; // F32 [.., ceil(N / br), ceil(K / bc)]
    Tensor dense; // F32: e4m3(code) * scale, the f32 product
    int64_t br = 0, bc = 0;
};

enum class Codes {
    Normal,  // e4m3 of N(0, 64^2) samples: weight-like, mostly normal codes
    AnyByte, // every byte but the NaN codes 0x7f / 0xff: subnormals and +-448 included
    WithNan, // every byte, NaN codes included
};

int64_t blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
}

HostFp8 make_fp8(const std::vector<int64_t>& dims, int64_t br, int64_t bc, uint64_t seed,
                 Codes codes) {
    const int nd = int(dims.size());
    const int64_t N = dims[size_t(nd - 2)], K = dims[size_t(nd - 1)];
    const int64_t E = nd == 3 ? dims[0] : 1;
    const int64_t sr = blocks(N, br), sc = blocks(K, bc);
    std::vector<int64_t> sdims = dims;
    sdims[size_t(nd - 2)] = sr;
    sdims[size_t(nd - 1)] = sc;
    HostFp8 w;
    w.br = br;
    w.bc = bc;
    w.codes = Tensor::empty(cpu_allocator(), DType::F8E4M3, dims.data(), nd);
    w.scale = Tensor::empty(cpu_allocator(), DType::F32, sdims.data(), nd);
    w.dense = Tensor::empty(cpu_allocator(), DType::F32, dims.data(), nd);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> scale_dist(0.001f, 0.01f);
    std::normal_distribution<float> normal(0.0f, 64.0f);
    float* s = w.scale.ptr<float>();
    for (int64_t i = 0; i < w.scale.numel(); ++i) s[i] = scale_dist(rng);
    uint8_t* q = w.codes.ptr<uint8_t>();
    for (int64_t i = 0; i < w.codes.numel(); ++i) {
        uint8_t b = 0;
        if (codes == Codes::Normal) {
            b = model::float_to_fp8_e4m3(normal(rng));
        } else {
            b = uint8_t(rng() & 0xff);
            if (codes == Codes::AnyByte && (b & 0x7f) == 0x7f) b = uint8_t(b - 1);
        }
        q[i] = b;
    }
    float* d = w.dense.ptr<float>();
    for (int64_t e = 0; e < E; ++e)
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) {
                const int64_t i = (e * N + n) * K + k;
                d[i] = model::fp8_e4m3_to_float(q[i]) * s[(e * sr + n / br) * sc + k / bc];
            }
    return w;
}

// The device copy of a host fp8 weight, as the ops take it.
struct DeviceFp8 {
    Tensor codes, scale;
    ops::WeightView view;
    DeviceFp8(const ops::ExecContext& ctx, const HostFp8& w)
        : codes(to_device(ctx, w.codes, DType::F8E4M3)), scale(to_device(ctx, w.scale, DType::F32)),
          view(ops::WeightView::fp8(codes, scale, w.br, w.bc)) {}
};

struct Case {
    int64_t T, K, N;
    int64_t br = 128, bc = 128;
    bool accumulate = false;
    DType y = DType::BF16;
    Codes codes = Codes::Normal;
};

// x and y are column slices of wider tensors when x / y > 0 (row strides K + x and N + y); y's
// padding columns must come back untouched.
struct Pads {
    int64_t x = 0, y = 0;
};

std::string describe(const Case& s, Pads pad, bool gemv) {
    return "T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
           " block=" + std::to_string(s.br) + "x" + std::to_string(s.bc) +
           " accumulate=" + std::to_string(s.accumulate) + " y=" + dtype_name(s.y) +
           " codes=" + std::to_string(int(s.codes)) + " x_pad=" + std::to_string(pad.x) +
           " y_pad=" + std::to_string(pad.y) + " gemv=" + std::to_string(gemv);
}

// Runs linear_fp8 (or, with dispatcher, ops::linear) on the device and the CPU reference on the
// dequantized weight; returns whether the GEMV takes the shape. The GEMV with an F32 y differs
// from the FP64 reference by f32 accumulation only; the route past it multiplies the weight
// rounded to bf16.
bool check_linear_fp8(const Case& s, Pads pad = {}, bool dispatcher = false) {
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(s.T * 1000003 + s.K * 1009 + s.N * 7 + s.bc);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + pad.x}, seed, 1.0f), DType::BF16);
    const HostFp8 w = make_fp8({s.N, s.K}, s.br, s.bc, seed + 1, s.codes);
    // y's start values about as large as the products, so that a lost accumulate shows.
    Tensor wide_y = rounded(random_tensor({s.T, s.N + pad.y}, seed + 2, 16.0f), s.y);
    Tensor ref = clone(wide_y);
    ops::linear(kCpuRef, clone(wide_x.view().narrow(1, 0, s.K)), w.dense,
                ref.view().narrow(1, 0, s.N), s.accumulate);

    Tensor dwide_x = to_device(c, wide_x, DType::BF16);
    const DeviceFp8 dw(c, w);
    Tensor dwide_y = to_device(c, wide_y, s.y);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K);
    const TensorView dy = dwide_y.view().narrow(1, 0, s.N);
    if (dispatcher)
        ops::linear(c, dx, dw.view, dy, s.accumulate);
    else
        ops::cuda::linear_fp8(c, dx, dw.view, dy, s.accumulate);
    const bool gemv = ops::cuda::linear_gemv_fp8_fits(dx, dw.view);
    const Tolerance& tol = s.y == DType::BF16 ? kBf16Reduction : gemv ? kCudaF32 : kBf16Elementwise;
    EXPECT_TRUE(near(to_host(c, dwide_y), ref, tol))
        << (dispatcher ? "ops::linear " : "linear_fp8 ") << describe(s, pad, gemv);
    return gemv;
}

TEST(CudaLinearFp8, GemvEveryRowCountPartialBlocks) {
    std::vector<int64_t> rows;
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) rows.push_back(T);
    rows.push_back(64);
    for (int64_t T : rows) {
        const bool gemv = T <= kGemvMaxRows;
        SCOPED_TRACE("T=" + std::to_string(T));
        // K = 2048: whole 128-column blocks, one unrolled step of 4 x 512 columns per lane.
        // N = 257: not a multiple of the 8 warps (columns) per block; a 1-row last scale block.
        EXPECT_EQ(check_linear_fp8({T, 2048, 257, 128, 128, true, DType::BF16}), gemv);
        // K = 2064 = 16 * 128 + 16: a 16-column last block and a one-load tail past the step.
        EXPECT_EQ(check_linear_fp8({T, 2064, 1000, 128, 128, false, DType::F32}), gemv);
        // K = 272 < one step (17 of the 32 lanes load); N = 130: a 2-row last block.
        EXPECT_EQ(check_linear_fp8({T, 272, 130, 128, 128, true, DType::F32}), gemv);
        // Non-square blocks: 64 x 32 (16 scale columns per 512-column load step).
        EXPECT_EQ(check_linear_fp8({T, 2064, 130, 64, 32, false, DType::BF16}), gemv);
        EXPECT_EQ(check_linear_fp8({T, 272, 257, 64, 32, true, DType::F32, Codes::AnyByte}), gemv);
    }
}

TEST(CudaLinearFp8, BlockShapesAndFallbacks) {
    for (int64_t T : {1, 2, 5, 8}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        // Block columns 16 (the smallest), 48 and 160 (512 % bc != 0: the scale cursor carries a
        // remainder), 1024 (larger than a load step) and 2064 (one block over all of K); block
        // rows 1, 3 and 256 (N = 130: one partial block).
        EXPECT_TRUE(check_linear_fp8({T, 2064, 130, 1, 16, false, DType::F32}));
        EXPECT_TRUE(check_linear_fp8({T, 2064, 130, 3, 48, true, DType::F32}));
        EXPECT_TRUE(check_linear_fp8({T, 2064, 130, 128, 160, false, DType::BF16}));
        EXPECT_TRUE(check_linear_fp8({T, 2064, 130, 256, 1024, true, DType::F32}));
        EXPECT_TRUE(check_linear_fp8({T, 2064, 130, 7, 2064, false, DType::F32, Codes::AnyByte}));
        // Block columns not a multiple of 16, or K % 16 != 0: dequantize + cuBLAS.
        EXPECT_FALSE(check_linear_fp8({T, 2048, 130, 128, 8, true, DType::F32}));
        EXPECT_FALSE(check_linear_fp8({T, 2064, 257, 100, 100, false, DType::BF16}));
        EXPECT_FALSE(check_linear_fp8({T, 200, 130, 64, 32, true, DType::F32}));
    }
}

TEST(CudaLinearFp8, StridedRows) {
    const auto fits = [](int64_t T) { return T <= kGemvMaxRows; };
    // Rows 8 elements (16 bytes) apart past K: the GEMV; y strided too.
    EXPECT_TRUE(check_linear_fp8({1, 2048, 257, 128, 128, false, DType::BF16}, {8, 0}));
    EXPECT_EQ(check_linear_fp8({3, 2064, 130, 128, 128, true, DType::F32}, {24, 5}), fits(3));
    EXPECT_EQ(check_linear_fp8({8, 2064, 257, 64, 32, true, DType::BF16}, {8, 3}), fits(8));
    EXPECT_FALSE(check_linear_fp8({9, 2064, 257, 128, 128, false, DType::F32}, {8, 3}));
    // Row stride K + 4: the GEMV refuses two rows or more (unaligned rows), takes a single row.
    EXPECT_FALSE(check_linear_fp8({3, 2048, 130, 128, 128, false, DType::BF16}, {4, 0}));
    EXPECT_FALSE(check_linear_fp8({2, 2048, 130, 128, 128, true, DType::F32}, {4, 7}));
    EXPECT_TRUE(check_linear_fp8({1, 2048, 130, 128, 128, true, DType::F32}, {4, 0}));
}

TEST(CudaLinearFp8, RealDecodeShapes) {
    // Qwen3.6-27B FP8 shapes (K, N): an attention projection and the MLP's down projection.
    const std::pair<int64_t, int64_t> shapes[] = {{5120, 6144}, {17408, 5120}};
    for (int64_t T : {1, 4})
        for (auto [K, N] : shapes)
            EXPECT_EQ(check_linear_fp8({T, K, N, 128, 128, T == 1, DType::BF16}),
                      T <= kGemvMaxRows);
}

TEST(CudaLinearFp8, DispatcherTakesTheFp8Routes) {
    EXPECT_TRUE(check_linear_fp8({1, 2064, 257, 128, 128, true, DType::BF16}, {}, true));
    EXPECT_TRUE(check_linear_fp8({4, 272, 130, 64, 32, false, DType::F32}, {}, true));
    EXPECT_FALSE(
        check_linear_fp8({kGemvMaxRows + 1, 2048, 130, 128, 128, true, DType::BF16}, {}, true));
}

TEST(CudaLinearFp8, GemvFitsOnlyItsShapes) {
    const auto c = cuda_ctx(DType::BF16);
    const HostFp8 w = make_fp8({130, 2048}, 128, 128, 7, Codes::Normal);
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
    Tensor dense = to_device(c, w.dense, DType::BF16);
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xv.narrow(0, 0, 1), dense));
    const ops::WeightView narrow_blocks = ops::WeightView::fp8(dw.codes, dw.scale, 128, 8);
    EXPECT_FALSE(ops::cuda::linear_gemv_fp8_fits(xv.narrow(0, 0, 1), narrow_blocks));
}

TEST(CudaLinearFp8, RejectsNonBf16Activations) {
    const auto c = cuda_ctx(DType::F32);
    const HostFp8 w = make_fp8({130, 256}, 128, 128, 8, Codes::Normal);
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
    const HostFp8 w = make_fp8(dims, br, bc, seed, Codes::WithNan);
    const int nd = int(dims.size());
    const int64_t E = nd == 3 ? dims[0] : 1, per_expert = w.dense.numel() / E;
    Tensor initial = Tensor::empty(cpu_allocator(), DType::F32, dims.data(), nd);
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < initial.numel(); ++i)
        initial.ptr<float>()[i] = bf16_to_float(float_to_bf16(normal(rng)));
    int64_t nans = 0;
    for (int64_t i = 0; i < w.dense.numel(); ++i) nans += std::isnan(w.dense.ptr<float>()[i]);
    ASSERT_GT(nans, 0) << "the weight should hold NaN codes";
    Tensor expected = clone(initial);
    for (int64_t e = 0; e < E; ++e) {
        if (!used.empty() && used[size_t(e)] == 0) continue;
        for (int64_t i = e * per_expert; i < (e + 1) * per_expert; ++i)
            expected.ptr<float>()[i] = bf16_to_float(float_to_bf16(w.dense.ptr<float>()[i]));
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
