// The vision tower's CUDA ops against the CPU reference (label cuda): layer_norm, bias_act,
// rope_table and segment_attention in F32 and BF16, at the real shapes (one 1024x1024 image:
// T = 4096 patches, hidden 1152, MLP 4304, 16 heads of 72) and at tails (T = 1, K and N not
// multiples of a 16-byte chunk, strided and unaligned views). segment_attention runs both CUDA
// routes, each checked: the tensor-core kernel (bf16, D a multiple of 8 up to 128) and the
// CUDA-core kernel (any D <= 256, F32), on unequal and many segments, q/k/v as strided views of
// one fused [T, 3, nH, D] projection, and a graph replay equal to the eager run.
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/bias_act.h"
#include "ops/cuda/vision_ops.h"
#include "ops/layer_norm.h"
#include "ops/rope_table.h"
#include "ops/segment_attention.h"

namespace ninfer::test {
namespace {

class CudaVisionOps : public CudaDtypeTest {};

TEST_P(CudaVisionOps, LayerNormShapesAndWeightDtypes) {
    const auto c = ctx();
    for (int64_t T : {1, 3, 300, 4096}) {
        for (int64_t K : {1152, 7, 100, 1153}) {
            Tensor x = input({T, K}, 1, 2.0f);
            for (int64_t i = 0; i < x.numel(); ++i) x.ptr<float>()[i] += 3.0f; // offset mean
            x = rounded(x, dt());
            for (DType wdt : {dt(), DType::F32}) {
                Tensor w = rounded(random_tensor({K}, 2), wdt),
                       b = rounded(random_tensor({K}, 3, 0.5f), wdt);
                Tensor ref = zeros({T, K});
                ops::layer_norm(kCpuRef, x, w, b, 1e-6f, ref);
                Tensor dx = to_device(c, x, dt()), dy = to_device(c, zeros({T, K}), dt());
                ops::layer_norm(c, dx, to_device(c, w, wdt), to_device(c, b, wdt), 1e-6f, dy);
                EXPECT_TRUE(near(to_host(c, dy), ref, elementwise()))
                    << "T=" << T << " K=" << K << " w " << dtype_name(wdt);
            }
        }
    }
}

TEST_P(CudaVisionOps, LayerNormStridedAndInPlace) {
    const auto c = ctx();
    const int64_t T = 33, K = 1152;
    for (int64_t col0 : {8, 3}) { // 16-byte aligned rows (bf16), and not
        Tensor big = input({T, K + 16}, 4, 2.0f), w = input({K}, 5), b = input({K}, 6);
        const TensorView hx = big.view().narrow(1, col0, K);
        Tensor ref = zeros({T, K});
        ops::layer_norm(kCpuRef, hx, w, b, 1e-5f, ref);
        Tensor dbig = to_device(c, big, dt());
        const TensorView dx = dbig.view().narrow(1, col0, K);
        ops::layer_norm(c, dx, to_device(c, w, dt()), to_device(c, b, dt()), 1e-5f, dx);
        EXPECT_TRUE(near(to_host(c, dbig).view().narrow(1, col0, K), ref, elementwise()))
            << "col0=" << col0;
    }
}

TEST_P(CudaVisionOps, BiasActShapesAndBiasDtypes) {
    const auto c = ctx();
    for (int64_t T : {1, 65, 4096}) {
        for (int64_t N : {4304, 1152, 7}) {
            for (auto act :
                 {ops::Activation::GeluTanh, ops::Activation::GeluErf, ops::Activation::None}) {
                for (DType bdt : {dt(), DType::F32}) {
                    Tensor y0 = input({T, N}, 7, 3.0f), b = rounded(random_tensor({N}, 8), bdt);
                    Tensor ref = clone(y0);
                    ops::bias_act(kCpuRef, ref, b, act);
                    Tensor dy = to_device(c, y0, dt());
                    ops::bias_act(c, dy, to_device(c, b, bdt), act);
                    EXPECT_TRUE(near(to_host(c, dy), ref, elementwise()))
                        << "T=" << T << " N=" << N << " act " << int(act) << " b "
                        << dtype_name(bdt);
                }
            }
        }
    }
}

TEST_P(CudaVisionOps, BiasActStridedRows) {
    const auto c = ctx();
    const int64_t T = 20, N = 4304;
    for (int64_t col0 : {8, 1}) {
        Tensor big = input({T, N + 8}, 9, 2.0f), b = input({N}, 10);
        Tensor ref = clone(big);
        ops::bias_act(kCpuRef, ref.view().narrow(1, col0, N), b, ops::Activation::GeluTanh);
        Tensor dbig = to_device(c, big, dt());
        ops::bias_act(c, dbig.view().narrow(1, col0, N), to_device(c, b, dt()),
                      ops::Activation::GeluTanh);
        EXPECT_TRUE(near(to_host(c, dbig), ref, elementwise())) << "col0=" << col0;
    }
}

TEST_P(CudaVisionOps, RopeTableOnFusedQkv) {
    const auto c = ctx();
    struct Case {
        int64_t T, nH, D, rotary;
    };
    for (Case tc : {Case{1, 16, 72, 72}, {4096, 16, 72, 72}, {37, 4, 16, 8}, {5, 3, 10, 6}}) {
        const int64_t half = tc.rotary / 2, width = 3 * tc.nH * tc.D;
        Tensor qkv = input({tc.T, width}, 11, 2.0f), angle = random_tensor({tc.T, half}, 12, 4.0f);
        Tensor cs = zeros({tc.T, half}), sn = zeros({tc.T, half});
        for (int64_t i = 0; i < tc.T * half; ++i) {
            cs.ptr<float>()[i] = std::cos(angle.ptr<float>()[i]);
            sn.ptr<float>()[i] = std::sin(angle.ptr<float>()[i]);
        }
        Tensor ref = clone(qkv), dqkv = to_device(c, qkv, dt());
        Tensor dcs = to_device(c, cs, DType::F32), dsn = to_device(c, sn, DType::F32);
        for (int part = 0; part < 2; ++part) {
            const int64_t col0 = part * tc.nH * tc.D;
            ops::rope_table(kCpuRef, ref.view().split_heads(col0, tc.nH, tc.D), cs, sn, tc.rotary);
            ops::rope_table(c, dqkv.view().split_heads(col0, tc.nH, tc.D), dcs, dsn, tc.rotary);
        }
        EXPECT_TRUE(near(to_host(c, dqkv), ref, elementwise())) << "T=" << tc.T << " D=" << tc.D;
    }
}

enum class Route { Auto, Flash, General };

struct AttentionCase {
    int64_t nH, D;
    std::vector<int32_t> lengths; // segment lengths
    std::vector<int64_t> heads;   // heads compared with the CPU reference (empty: all)
    float q_scale = 1.0f;
    float scale = 0.0f; // 0: 1 / sqrt(D)
};

// Runs segment_attention on a fused [T, 3, nH, D] projection on the device (route as asked) and
// compares the listed heads with the CPU reference on the same rounded inputs.
void run_attention(const ops::ExecContext& c, DType dt, const AttentionCase& tc, Route route,
                   const Tolerance& tol, int64_t misalign = 0) {
    std::vector<int32_t> seg{0};
    for (int32_t n : tc.lengths) seg.push_back(seg.back() + n);
    const int64_t T = seg.back(), nH = tc.nH, D = tc.D, width = 3 * nH * D;
    Tensor fused = rounded(random_tensor({T, width + misalign}, 20, 1.0f), dt);
    for (int64_t t = 0; t < T; ++t) // a larger q spread: peaked softmaxes, not near-uniform ones
        for (int64_t i = 0; i < nH * D; ++i) {
            float& x = fused.ptr<float>()[t * (width + misalign) + misalign + i];
            x *= tc.q_scale;
            if (dt == DType::BF16) x = bf16_to_float(float_to_bf16(x));
        }
    auto parts = [&](const TensorView& f, int i) {
        return f.narrow(1, misalign, width).split_heads(i * nH * D, nH, D);
    };
    Tensor dfused = to_device(c, fused, dt);
    Tensor dseg = to_device(c, i32_tensor(seg), DType::I32);
    Tensor out = to_device(c, zeros({T, nH, D}), dt);
    const TensorView q = parts(dfused, 0), k = parts(dfused, 1), v = parts(dfused, 2);
    const float scale = tc.scale != 0.0f ? tc.scale : 1.0f / std::sqrt(float(D));
    std::ostringstream what;
    what << dtype_name(dt) << " nH=" << nH << " D=" << D << " T=" << T
         << " segments=" << seg.size() - 1 << " misalign=" << misalign << " route=" << int(route);
    switch (route) {
    case Route::Auto:
        ops::segment_attention(c, q, k, v, seg.data(), dseg, scale, out);
        break;
    case Route::Flash:
        ASSERT_TRUE(ops::cuda::segment_attention_flash_supported(q, k, v, out)) << what.str();
        ops::cuda::segment_attention_flash(c, q, k, v, seg.data(), dseg, scale, out);
        break;
    case Route::General:
        ops::cuda::segment_attention_general(c, q, k, v, seg.data(), dseg, scale, out);
        break;
    }
    const Tensor got = to_host(c, out);
    std::vector<int64_t> heads = tc.heads;
    if (heads.empty())
        for (int64_t h = 0; h < nH; ++h) heads.push_back(h);
    // The reference per head (a [T, 1, D] view): at T = 4096 a subset of heads keeps it short.
    const Tensor hseg = i32_tensor(seg);
    for (int64_t h : heads) {
        Tensor ref = zeros({T, 1, D});
        auto head = [&](int i) { return parts(fused, i).narrow(1, h, 1); };
        ops::segment_attention(kCpuRef, head(0), head(1), head(2), seg.data(), hseg, scale, ref);
        EXPECT_TRUE(near(got.view().narrow(1, h, 1), ref, tol)) << what.str() << " head " << h;
    }
}

std::vector<int32_t> random_lengths(int count, int lo, int hi, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> len(lo, hi);
    std::vector<int32_t> out;
    for (int i = 0; i < count; ++i) out.push_back(len(gen));
    return out;
}

TEST(CudaSegmentAttention, RealImageTakesTheTensorCoreRoute) {
    // One 1024x1024 image: 4096 patches, 16 heads of 72, bf16, the views of the fused qkv.
    const auto c = cuda_ctx(DType::BF16);
    run_attention(c, DType::BF16, {16, 72, {4096}, {0, 7, 15}, 2.0f}, Route::Flash, kBf16Reduction);
    run_attention(c, DType::BF16, {16, 72, {4096}, {3}, 2.0f}, Route::Auto, kBf16Reduction);
}

TEST(CudaSegmentAttention, UnequalSegmentsBothRoutes) {
    // Segment lengths around the 128-row query tile and the 64-key tile, and a one-row image.
    const auto c = cuda_ctx(DType::BF16);
    const AttentionCase tc{16, 72, {1, 127, 128, 129, 700, 63, 1, 64, 65, 1000}, {0, 9, 15}, 2.0f};
    run_attention(c, DType::BF16, tc, Route::Flash, kBf16Reduction);
    run_attention(c, DType::BF16, tc, Route::General, kBf16Reduction);
}

TEST(CudaSegmentAttention, ManySmallSegments) {
    const auto c = cuda_ctx(DType::BF16);
    const AttentionCase tc{16, 72, random_lengths(300, 1, 20, 1), {}, 2.0f};
    run_attention(c, DType::BF16, tc, Route::Flash, kBf16Reduction);
    run_attention(c, DType::BF16, tc, Route::General, kBf16Reduction);
    // More segments than a grid's z dimension (65535): the kernels loop over them.
    const AttentionCase ones{1, 16, std::vector<int32_t>(70000, 1), {}, 1.0f};
    run_attention(c, DType::BF16, ones, Route::Flash, kBf16Reduction);
    run_attention(c, DType::BF16, ones, Route::General, kBf16Reduction);
}

TEST(CudaSegmentAttention, TensorCoreHeadDims) {
    // Every head dim the tensor-core route takes (16: the tiny test model; 72: the real one).
    const auto c = cuda_ctx(DType::BF16);
    for (int64_t D : {16, 32, 64, 72, 80, 96, 128})
        run_attention(c, DType::BF16, {4, D, {300, 1, 77}, {}, 2.0f}, Route::Flash, kBf16Reduction);
}

TEST(CudaSegmentAttention, CudaCoreRouteOtherShapes) {
    // Head dims the tensor-core route does not take, F32, and a misaligned bf16 view: the
    // dispatcher picks the CUDA-core kernel for all of them.
    const auto c = cuda_ctx(DType::BF16);
    for (int64_t D : {5, 40, 200, 256}) {
        run_attention(c, DType::BF16, {3, D, {150, 1, 90}, {}, 2.0f}, Route::Auto, kBf16Reduction);
        const auto c32 = cuda_ctx(DType::F32);
        run_attention(c32, DType::F32, {3, D, {150, 1, 90}, {}, 2.0f}, Route::Auto, kCudaF32);
    }
    run_attention(c, DType::BF16, {16, 72, {300, 17}, {}, 2.0f}, Route::Auto, kBf16Reduction,
                  /*misalign=*/1);
    run_attention(c, DType::BF16, {4, 72, {200, 33}, {}, 2.0f, -0.1f}, Route::Auto,
                  kBf16Reduction); // a negative scale
    const auto c32 = cuda_ctx(DType::F32);
    run_attention(c32, DType::F32, {16, 72, {4096}, {0, 15}, 2.0f}, Route::Auto, kCudaF32);
    run_attention(c32, DType::F32, {16, 72, {1, 127, 128, 129, 700}, {}, 2.0f}, Route::Auto,
                  kCudaF32);
}

TEST(CudaSegmentAttention, RejectsHeadDimsPast256) {
    const auto c = cuda_ctx(DType::BF16);
    Tensor q = to_device(c, zeros({4, 1, 264}), DType::BF16);
    Tensor out = to_device(c, zeros({4, 1, 264}), DType::BF16);
    const std::vector<int32_t> seg{0, 4};
    Tensor dseg = to_device(c, i32_tensor(seg), DType::I32);
    EXPECT_THROW(ops::segment_attention(c, q, q, q, seg.data(), dseg, 1.0f, out), Error);
}

TEST(CudaSegmentAttention, GraphReplayEqualsEagerBitForBit) {
    const auto base = cuda_ctx(DType::BF16);
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    const int64_t nH = 16, D = 72;
    const std::vector<int32_t> seg{0, 1000, 1001, 1700};
    const int64_t T = seg.back();
    Tensor dfused =
        to_device(c, rounded(random_tensor({T, 3 * nH * D}, 30), DType::BF16), DType::BF16);
    Tensor dseg = to_device(c, i32_tensor(seg), DType::I32);
    const Tensor initial = zeros({T, nH, D});
    Tensor out = to_device(c, initial, DType::BF16);
    auto part = [&](int i) { return dfused.view().split_heads(i * nH * D, nH, D); };
    for (bool flash : {true, false})
        expect_replays_equal_eager(
            c, initial, out,
            [&] {
                if (flash)
                    ops::segment_attention(c, part(0), part(1), part(2), seg.data(), dseg, 0.12f,
                                           out);
                else
                    ops::cuda::segment_attention_general(c, part(0), part(1), part(2), seg.data(),
                                                         dseg, 0.12f, out);
            },
            flash ? "tensor-core route" : "CUDA-core route");
    ops::synchronize(c);
    ops::bind_device(base);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaVisionOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
