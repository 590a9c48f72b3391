// moe_block's fused decode route with block-wise fp8 weights (ops/cuda/moe_decode.cu, label cuda)
// against the CPU reference on the weights dequantized on the host (e4m3(code) * scale in f32,
// exact): Qwen3.6-35B-A3B's shapes (E = 256, top-8, H = 2048, I = Is = 512, 128 x 128 blocks) at
// T = 1, 2, 8 (64 pairs, the dense decode limit), 32 and 128 (1024 pairs, the fp8 limit), partial scale blocks (H = 272, I = 144, Is = 160),
// non-square and non-power-of-two blocks (64 x 32, 3 x 48), more than 256 experts, routed rows
// longer than one down batch; two runs and a graph replay bit for bit; the dispatcher taking the
// route; the shapes the route refuses (mixed dense and fp8 weights, H % 16 != 0, block sizes).
// Negative controls: the reference with the up rows' scale rows taken from i / Br instead of
// (I + i) / Br, or with the scales ignored, must not match.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/fp8.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

int64_t blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
}

// How the host dequantizes: correctly, or with one of the bugs the negative controls model.
enum class Dequant {
    Exact,
    UpScaleRowFromI, // gate_up stacks: row n >= N / 2 takes scale row (n - N / 2) / Br
    NoScale,         // the codes alone
};

// A host fp8 weight [.., N, K]: codes (every byte but the NaN codes 0x7f / 0xff, so subnormals
// and +-448 appear), F32 scales [.., ceil(N / br), ceil(K / bc)] in [0.5, 1.5] * scale_mid.
struct HostFp8 {
    Tensor codes, scale;
    int64_t br = 0, bc = 0;

    HostFp8(const std::vector<int64_t>& dims, int64_t block_rows, int64_t block_cols, uint64_t seed,
            float scale_mid)
        : br(block_rows), bc(block_cols) {
        const int nd = int(dims.size());
        std::vector<int64_t> sdims = dims;
        sdims[size_t(nd - 2)] = blocks(dims[size_t(nd - 2)], br);
        sdims[size_t(nd - 1)] = blocks(dims[size_t(nd - 1)], bc);
        codes = Tensor::empty(cpu_allocator(), DType::F8E4M3, dims.data(), nd);
        scale = Tensor::empty(cpu_allocator(), DType::F32, sdims.data(), nd);
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<float> scale_dist(0.5f * scale_mid, 1.5f * scale_mid);
        float* s = scale.ptr<float>();
        for (int64_t i = 0; i < scale.numel(); ++i) s[i] = scale_dist(rng);
        uint8_t* q = codes.ptr<uint8_t>();
        const int64_t n = codes.numel();
        for (int64_t i = 0; i < n; i += 8) {
            uint64_t bits = rng();
            for (int64_t b = i; b < std::min(n, i + 8); ++b, bits >>= 8) {
                const uint8_t v = uint8_t(bits & 0xff);
                q[b] = (v & 0x7f) == 0x7f ? uint8_t(v - 1) : v;
            }
        }
    }

    // The dense F32 weight e4m3(code) * scale (the f32 product, exact), or a buggy variant.
    Tensor dense(Dequant mode = Dequant::Exact) const {
        const int nd = codes.view().ndim;
        const int64_t N = codes.size(nd - 2), K = codes.size(nd - 1);
        const int64_t E = nd == 3 ? codes.size(0) : 1;
        const int64_t sr = blocks(N, br), sc = blocks(K, bc);
        float lut[256];
        for (int v = 0; v < 256; ++v) lut[v] = model::fp8_e4m3_to_float(uint8_t(v));
        Tensor d = Tensor::empty(cpu_allocator(), DType::F32, codes.view().shape.data(), nd);
        const uint8_t* q = codes.ptr<uint8_t>();
        const float* s = scale.ptr<float>();
        float* out = d.ptr<float>();
        for (int64_t e = 0; e < E; ++e)
            for (int64_t n = 0; n < N; ++n) {
                const int64_t sn = mode == Dequant::UpScaleRowFromI && n >= N / 2 ? n - N / 2 : n;
                const float* srow = s + (e * sr + sn / br) * sc;
                const int64_t row = (e * N + n) * K;
                for (int64_t k = 0; k < K; ++k)
                    out[row + k] =
                        lut[q[row + k]] * (mode == Dequant::NoScale ? 1.0f : srow[k / bc]);
            }
        return d;
    }
};

// A device copy, as the ops take it.
struct DeviceFp8 {
    Tensor codes, scale;
    ops::WeightView view;
    DeviceFp8(const ops::ExecContext& ctx, const HostFp8& w)
        : codes(to_device(ctx, w.codes, DType::F8E4M3)), scale(to_device(ctx, w.scale, DType::F32)),
          view(ops::WeightView::fp8(codes, scale, w.br, w.bc)) {}
};

struct Dims {
    int64_t E, k, H, I, Is;
    int64_t br = 128, bc = 128;
};

std::string describe(const Dims& d, int64_t T) {
    return "T=" + std::to_string(T) + " E=" + std::to_string(d.E) + " k=" + std::to_string(d.k) +
           " H=" + std::to_string(d.H) + " I=" + std::to_string(d.I) +
           " Is=" + std::to_string(d.Is) + " block=" + std::to_string(d.br) + "x" +
           std::to_string(d.bc);
}

// The block scale for weights [.., N, K] with RMS ~ 1.5 / sqrt(K) (the codes' RMS is ~107), so
// that G h, U h and the block's output are O(1), as large as y's start values: a wrong scale
// anywhere moves y by O(1) (the bf16 tolerance is relative to ||y||).
float scale_for(int64_t K) {
    return 1.5f / (std::sqrt(float(K)) * 107.0f);
}

// One MoE block's four fp8 weights on the host (with their dense F32 references) and the device.
struct MoeFp8 {
    Dims d;
    HostFp8 egu, edown, sgu, sdown;
    Tensor egu_ref, edown_ref, sgu_ref, sdown_ref;
    DeviceFp8 d_egu, d_edown, d_sgu, d_sdown;

    MoeFp8(const ops::ExecContext& c, const Dims& dims, uint64_t seed)
        : d(dims), egu({d.E, 2 * d.I, d.H}, d.br, d.bc, seed, scale_for(d.H)),
          edown({d.E, d.H, d.I}, d.br, d.bc, seed + 1, scale_for(d.I)),
          sgu({2 * d.Is, d.H}, d.br, d.bc, seed + 2, scale_for(d.H)),
          sdown({d.H, d.Is}, d.br, d.bc, seed + 3, scale_for(d.Is)), egu_ref(egu.dense()),
          edown_ref(edown.dense()), sgu_ref(sgu.dense()), sdown_ref(sdown.dense()), d_egu(c, egu),
          d_edown(c, edown), d_sgu(c, sgu), d_sdown(c, sdown) {}

    bool fits(const TensorView& h) const {
        return ops::cuda::moe_block_decode_fits(h, d.k, d_egu.view, d_edown.view, d_sgu.view,
                                                d_sdown.view);
    }
    void run(const ops::ExecContext& c, const TensorView& h, const TensorView& logits,
             const TensorView& y) const {
        ops::cuda::moe_block_decode(c, h, logits, d.k, d_egu.view, d_edown.view, d_sgu.view,
                                    d_sdown.view, y);
    }
    Tensor reference(const Tensor& h, const Tensor& logits, const Tensor& y0,
                     const Tensor& egu_w) const {
        Tensor ref = clone(y0);
        ops::moe_block(kCpuRef, h, logits, d.k, egu_w, edown_ref, sgu_ref, sdown_ref, ref);
        return ref;
    }
};

struct Inputs {
    Tensor h, logits, y0;
};
Inputs inputs(const Dims& d, int64_t T, uint64_t seed) {
    return {rounded(random_tensor({T, d.H}, seed), DType::BF16),
            random_tensor({T, d.E + 1}, seed + 1, 2.0f),
            rounded(random_tensor({T, d.H}, seed + 2), DType::BF16)};
}

// y0 + moe_block(h) through the fp8 decode route against the CPU reference; a second run and the
// dispatcher (ops::moe_block) give the same bits. Returns the device result.
Tensor check_case(const ops::ExecContext& c, const MoeFp8& m, int64_t T, uint64_t seed) {
    const std::string what = describe(m.d, T);
    const Inputs in = inputs(m.d, T, seed);
    const Tensor dh = to_device(c, in.h, DType::BF16);
    const Tensor dlogits = to_device(c, in.logits, DType::F32);
    EXPECT_TRUE(m.fits(dh)) << what;
    Tensor y = to_device(c, in.y0, DType::BF16);
    m.run(c, dh, dlogits, y);
    const Tensor out = to_host(c, y);
    EXPECT_TRUE(near(out, m.reference(in.h, in.logits, in.y0, m.egu_ref), kBf16Reduction)) << what;

    Tensor y2 = to_device(c, in.y0, DType::BF16);
    m.run(c, dh, dlogits, y2);
    EXPECT_TRUE(near(to_host(c, y2), out, kExact)) << "second run, " << what;
    Tensor y3 = to_device(c, in.y0, DType::BF16);
    ops::moe_block(c, dh, dlogits, m.d.k, m.d_egu.view, m.d_edown.view, m.d_sgu.view,
                   m.d_sdown.view, y3);
    EXPECT_TRUE(near(to_host(c, y3), out, kExact)) << "ops::moe_block, " << what;
    return out;
}

TEST(CudaMoeFp8, Qwen35bShapes) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {256, 8, 2048, 512, 512}, 500);
    for (int64_t T : {1, 2, 8}) check_case(c, m, T, 510 + uint64_t(T));
    // Past the dense route's 64 pairs: fp8 takes it up to 1024 (32 x 8 = 256; 128 x 8 = 1024).
    for (int64_t T : {32, 128}) check_case(c, m, T, 520 + uint64_t(T));
}

TEST(CudaMoeFp8, PartialBlocks) {
    const auto c = cuda_ctx(DType::BF16);
    // H = 272 (17 of the 32 lanes load), I = 144, Is = 160 (I != Is: idle up blocks); the last
    // scale block of every dimension is partial, and the up rows' scale rows start mid-block.
    const MoeFp8 m(c, {16, 4, 272, 144, 160}, 520);
    for (int64_t T : {1, 3, 8}) check_case(c, m, T, 530 + uint64_t(T));
}

TEST(CudaMoeFp8, NonSquareBlocks) {
    const auto c = cuda_ctx(DType::BF16);
    for (auto [br, bc] : {std::pair<int64_t, int64_t>{64, 32}, {3, 48}, {1, 16}, {256, 512}}) {
        const MoeFp8 m(c, {16, 4, 272, 144, 160, br, bc}, 540 + uint64_t(br));
        for (int64_t T : {2, 5}) check_case(c, m, T, 550 + uint64_t(T));
    }
}

TEST(CudaMoeFp8, ManyExpertsAndLongRows) {
    const auto c = cuda_ctx(DType::BF16);
    // E > 256: the route keeps 16 logits per lane (the other up-kernel instance).
    check_case(c, MoeFp8(c, {320, 8, 256, 128, 128}, 560), 2, 561);
    // I = Is = 1040: 3 load steps per routed row, 24 per column at top-8 (two down batches),
    // and the shared row past its prefetch.
    const MoeFp8 m(c, {16, 8, 128, 1040, 1040}, 570);
    for (int64_t T : {1, 4}) check_case(c, m, T, 571 + uint64_t(T));
}

TEST(CudaMoeFp8, NegativeControls) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {16, 4, 272, 144, 160}, 580);
    const Inputs in = inputs(m.d, 4, 581);
    const Tensor out = check_case(c, m, 4, 581);
    EXPECT_FALSE(near(out,
                      m.reference(in.h, in.logits, in.y0, m.egu.dense(Dequant::UpScaleRowFromI)),
                      kBf16Reduction));
    EXPECT_FALSE(near(out, m.reference(in.h, in.logits, in.y0, m.egu.dense(Dequant::NoScale)),
                      kBf16Reduction));
}

TEST(CudaMoeFp8, GraphReplayEqualsEagerBitForBit) {
    const auto base = cuda_ctx(DType::BF16);
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    {
        const MoeFp8 m(c, {16, 8, 272, 144, 160}, 590);
        const Inputs in = inputs(m.d, 3, 591);
        const Tensor dh = to_device(c, in.h, DType::BF16);
        const Tensor dlogits = to_device(c, in.logits, DType::F32);
        Tensor y = to_device(c, in.y0, DType::BF16);
        ASSERT_TRUE(m.fits(dh));
        expect_replays_equal_eager(
            c, in.y0, y, [&] { m.run(c, dh, dlogits, y); }, "fp8 T=3");
        ops::synchronize(c);
    }
    ops::bind_device(base);
}

TEST(CudaMoeFp8, ShapesTheRouteRefuses) {
    const auto c = cuda_ctx(DType::BF16);
    const Dims d{16, 4, 272, 144, 160};
    const MoeFp8 m(c, d, 600);
    const Tensor h = to_device(c, rounded(random_tensor({2, d.H}, 601), DType::BF16), DType::BF16);
    EXPECT_TRUE(m.fits(h));
    // Mixed dense and fp8 weights: the dispatcher's composition.
    const Tensor dense_egu = to_device(c, rounded(m.egu_ref, DType::BF16), DType::BF16);
    const Tensor dense_sdown = to_device(c, rounded(m.sdown_ref, DType::BF16), DType::BF16);
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, d.k, dense_egu, m.d_edown.view, m.d_sgu.view,
                                                  m.d_sdown.view));
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, dense_sdown));
    // F32 activations with fp8 weights.
    const Tensor h32 = to_device(c, random_tensor({2, d.H}, 602), DType::F32);
    EXPECT_FALSE(m.fits(h32));
    // fp8 takes more pairs than the dense route (17 x 4 > 64), up to 1024 (257 x 4 is past it).
    const Tensor h17 = to_device(c, random_tensor({17, d.H}, 603), DType::BF16);
    EXPECT_TRUE(m.fits(h17));
    const Tensor h256 = to_device(c, random_tensor({256, d.H}, 604), DType::BF16);
    EXPECT_TRUE(m.fits(h256));
    const Tensor h257 = to_device(c, random_tensor({257, d.H}, 605), DType::BF16);
    EXPECT_FALSE(m.fits(h257));

    // H = 264: a multiple of 8 (the dense route takes it) but not of 16 codes.
    const Dims d264{16, 4, 264, 144, 160};
    const MoeFp8 m264(c, d264, 610);
    const Tensor h264 =
        to_device(c, rounded(random_tensor({2, 264}, 611), DType::BF16), DType::BF16);
    EXPECT_FALSE(m264.fits(h264));
    const Tensor egu264 = to_device(c, rounded(m264.egu_ref, DType::BF16), DType::BF16);
    const Tensor edown264 = to_device(c, rounded(m264.edown_ref, DType::BF16), DType::BF16);
    const Tensor sgu264 = to_device(c, rounded(m264.sgu_ref, DType::BF16), DType::BF16);
    const Tensor sdown264 = to_device(c, rounded(m264.sdown_ref, DType::BF16), DType::BF16);
    EXPECT_TRUE(ops::cuda::moe_block_decode_fits(h264, d.k, egu264, edown264, sgu264, sdown264));
    // I = 136 and Is = 168: multiples of 8, not 16.
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 136, 160}, 620).fits(h));
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 144, 168}, 621).fits(h));

    // Block columns not a multiple of 16, and the four weights on different block sizes.
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 144, 160, 128, 24}, 630).fits(h));
    const HostFp8 sdown64(std::vector<int64_t>{d.H, d.Is}, 64, 64, 631, scale_for(d.Is));
    const DeviceFp8 d_sdown64(c, sdown64);
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, d_sdown64.view));
}

} // namespace
} // namespace ninfer::test
