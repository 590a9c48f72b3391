// moe_block's fused decode route with block-wise fp8 weights (ops/cuda/moe_decode.cu, label cuda)
// against the CPU reference on the weights dequantized on the host (e4m3(code) * scale in f32,
// exact): Qwen3.6-35B-A3B's shapes (E = 256, top-8, H = 2048, I = Is = 512, 128 x 128 blocks) at
// T = 1, 2, 8 (64 pairs, the dense decode limit), 16 and 24 (192 pairs, the fp8 limit), partial scale blocks (H = 272, I = 144, Is = 160),
// non-square and non-power-of-two blocks (64 x 32, 3 x 48), more than 256 experts, routed rows
// longer than one down batch; two runs and a graph replay bit for bit; the dispatcher taking the
// route; the shapes the route refuses (mixed dense and fp8 weights, H % 16 != 0, block sizes).
// Negative controls: the reference with the up rows' scale rows taken from i / Br instead of
// (I + i) / Br, or with the scales ignored, must not match. And the grouped tensor-core route
// over fp8 stacks (moe_experts_fp8, prefill): bit for bit the bf16 grouped route on the
// dequantized stacks, against the CPU reference, with partial tiles and blocks, and
// ops::moe_block taking it (or the dequantize fallback) past the fused route's pairs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/fp8_test_util.h"
#include "cuda/moe_decode_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/memory.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

// A MoE weight: any code but NaN, scales in [0.5, 1.5] * scale_mid.
HostFp8 moe_weight(const std::vector<int64_t>& dims, int64_t br, int64_t bc, uint64_t seed,
                   float scale_mid) {
    return HostFp8(dims, br, bc, seed, Fp8Codes::AnyByte, 0.5f * scale_mid, 1.5f * scale_mid);
}

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
struct MoeFp8 : MoeDecodeCalls<MoeFp8> {
    Dims d;
    HostFp8 egu, edown, sgu, sdown;
    Tensor egu_ref, edown_ref, sgu_ref, sdown_ref;
    DeviceFp8 d_egu, d_edown, d_sgu, d_sdown;

    MoeFp8(const ops::ExecContext& c, const Dims& dims, uint64_t seed)
        : d(dims), egu(moe_weight({d.E, 2 * d.I, d.H}, d.br, d.bc, seed, scale_for(d.H))),
          edown(moe_weight({d.E, d.H, d.I}, d.br, d.bc, seed + 1, scale_for(d.I))),
          sgu(moe_weight({2 * d.Is, d.H}, d.br, d.bc, seed + 2, scale_for(d.H))),
          sdown(moe_weight({d.H, d.Is}, d.br, d.bc, seed + 3, scale_for(d.Is))), egu_ref(egu.dense()),
          edown_ref(edown.dense()), sgu_ref(sgu.dense()), sdown_ref(sdown.dense()), d_egu(c, egu),
          d_edown(c, edown), d_sgu(c, sgu), d_sdown(c, sdown) {}
};

// One case of the fp8 decode route (check_decode_case).
Tensor check_case(const ops::ExecContext& c, const MoeFp8& m, int64_t T, uint64_t seed) {
    return check_decode_case(c, m, T, seed, describe(m.d, T));
}

TEST(CudaMoeFp8, Qwen35bShapes) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {256, 8, 2048, 512, 512}, 500);
    for (int64_t T : {1, 2, 8}) check_case(c, m, T, 510 + uint64_t(T));
    // Past the dense route's 64 pairs: fp8 takes it up to 192 (16 x 8 = 128; 24 x 8 = 192).
    for (int64_t T : {16, 24}) check_case(c, m, T, 520 + uint64_t(T));
}

// moe_down_kernel's early route (opt-in): the same bits, on and with one early id wrong, at the
// 35B's shapes (T = 1, 8: one route a token, E = 256) and past 256 experts (the 16-logit lanes).
TEST(CudaMoeFp8, EarlyRouteGivesTheSameBits) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {256, 8, 2048, 512, 512}, 600);
    for (int64_t T : {1, 8}) check_early_route(c, m, T, 601 + uint64_t(T), describe(m.d, T));
    const MoeFp8 many(c, {300, 8, 256, 128, 128}, 610);
    check_early_route(c, many, 3, 611, describe(many.d, 3));
}

// A row's bits do not depend on the other rows of the call: T = 3, 7 and 24 at the 35B's shapes
// and T = 9 at top-2, row by row against each row alone.
TEST(CudaMoeFp8, RowsEqualThemselvesAlone) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {256, 8, 2048, 512, 512}, 530);
    for (int64_t T : {3, 7, 24}) check_rows_equal_alone(c, m, T, 531 + uint64_t(T), "fp8 35B");
    const MoeFp8 k2(c, {16, 2, 256, 128, 128}, 540);
    check_rows_equal_alone(c, k2, 9, 541, "fp8 top-2");
}

// Expert parallelism: runs of held fp8 experts on the fused route (T = 2) and the grouped
// tensor-core composition (T = 64: 256 pairs, past the fused route's 192).
TEST(CudaMoeFp8, HeldExpertRuns) {
    const auto c = cuda_ctx(DType::BF16);
    // The grouped runs on the weight-only tiles (the W8A8 route's own test: test_cuda_moe_w8a8).
    ForcedRoute weight_only(ops::RouteId::MoeExpertsFp8, ops::kRouteMmaSyncFp8);
    const MoeFp8 m(c, {16, 4, 256, 128, 128}, 700);
    check_held_runs(c, m, 2, 701, "fp8 fused");
    check_held_runs(c, m, 7, 703, "fp8 fused, T = 7");
    check_held_runs(c, m, 64, 702, "fp8 grouped");
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

// moe_experts_fp8 (the grouped tensor-core route over fp8 stacks, codes turned into bf16 in
// shared memory) for T tokens routed on the device: bit for bit the grouped bf16 route on the
// stacks dequantize_fp8 writes (past its 64-pair GEMV), and the CPU reference within bf16.
// (cpu_reference false: the bit-exact comparison only, for shapes the FP64 reference is slow on.)
void check_grouped(const ops::ExecContext& c, const MoeFp8& m, int64_t T, uint64_t seed,
                   bool cpu_reference = true) {
    const std::string what = "grouped " + describe(m.d, T);
    const MoeInputs in = moe_inputs(m.d, T, seed);
    const Tensor dh = to_device(c, in.h, DType::BF16);
    const Tensor dlogits = to_device(c, in.logits, DType::F32);
    Allocator& a = ops::device_allocator(c.device);
    Tensor w = Tensor::empty(a, DType::F32, {T, m.d.k}), ids = Tensor::empty(a, DType::I32, {T, m.d.k});
    ops::moe_route(c, dlogits.view().narrow(1, 0, m.d.E), m.d.k, w, ids);
    ASSERT_TRUE(ops::cuda::moe_experts_fp8_fits(dh, m.d_egu.view, m.d_edown.view)) << what;
    Tensor y = to_device(c, in.y0, DType::BF16);
    ops::cuda::moe_experts_fp8(c, dh, m.d_egu.view, m.d_edown.view, ids, w, y);
    const Tensor out = to_host(c, y);

    Tensor gu16 = Tensor::empty(a, DType::BF16, m.d_egu.codes.view().shape.data(), 3);
    Tensor dn16 = Tensor::empty(a, DType::BF16, m.d_edown.codes.view().shape.data(), 3);
    ops::cuda::dequantize_fp8(c, m.d_egu.view, gu16);
    ops::cuda::dequantize_fp8(c, m.d_edown.view, dn16);
    Tensor y16 = to_device(c, in.y0, DType::BF16);
    ops::cuda::moe_experts(c, dh, gu16, dn16, ids, w, y16);
    if (T * m.d.k > 64) {
        EXPECT_TRUE(near(to_host(c, y16), out, kExact)) << "bf16 stacks, " << what;
    }
    if (!cpu_reference) return;
    Tensor ref = clone(in.y0);
    ops::moe_experts(kCpuRef, in.h, m.egu_ref, m.edown_ref, to_host(c, ids), to_host(c, w), ref);
    EXPECT_TRUE(near(out, ref, kBf16Reduction)) << what;
}

TEST(CudaMoeFp8, GroupedTensorCoreRoute) {
    const auto c = cuda_ctx(DType::BF16);
    // moe_experts.fp8 forced to the weight-only tiles: the built-in table gives sm_90 the W8A8
    // route (activations quantized too; test_cuda_moe_w8a8), which these comparisons are not for.
    ForcedRoute weight_only(ops::RouteId::MoeExpertsFp8, ops::kRouteMmaSyncFp8);
    // The 35B's shapes: 9 x 8 = 72 pairs and 160 x 8 = 1280 (past the fused route: what
    // ops::moe_block takes for prefill) on 32-row tiles, 1000 x 8 on 64-row tiles (>= 24 rows
    // per expert), 3100 x 8 on 128-row tiles (>= 96 rows per expert).
    const MoeFp8 big(c, {256, 8, 2048, 512, 512}, 700);
    for (int64_t T : {9, 160}) check_grouped(c, big, T, 710 + uint64_t(T));
    check_grouped(c, big, 1000, 712, false);
    check_grouped(c, big, 3100, 713, false);
    // Partial K tiles (H = 272 = 4 x 64 + 16, I = 144 = 2 x 64 + 16), partial N blocks and scale
    // blocks, and 64 x 64 / 3 x 192 blocks.
    check_grouped(c, MoeFp8(c, {16, 4, 272, 144, 160}, 720), 40, 721);
    check_grouped(c, MoeFp8(c, {16, 4, 272, 144, 160, 64, 64}, 730), 40, 731);
    check_grouped(c, MoeFp8(c, {16, 4, 400, 208, 160, 3, 192}, 740), 70, 741);
}

TEST(CudaMoeFp8, BlockPastTheDecodeRoute) {
    // ops::moe_block at 160 x 8 pairs (past kFp8DecodeMaxPairs): the composition, whose routed
    // experts take the grouped fp8 route; block columns of 32 take dequantize-the-used-experts.
    const auto c = cuda_ctx(DType::BF16);
    for (int64_t bc : {128, 32}) {
        const MoeFp8 m(c, {64, 8, 272, 144, 160, 128, bc}, 750 + uint64_t(bc));
        const int64_t T = 160;
        const MoeInputs in = moe_inputs(m.d, T, 760);
        const Tensor dh = to_device(c, in.h, DType::BF16);
        EXPECT_FALSE(m.fits(dh));
        EXPECT_EQ(ops::cuda::moe_experts_fp8_fits(dh, m.d_egu.view, m.d_edown.view), bc == 128);
        const Tensor dlogits = to_device(c, in.logits, DType::F32);
        Tensor y = to_device(c, in.y0, DType::BF16);
        ops::moe_block(c, dh, dlogits, m.d.k, m.d_egu.view, m.d_edown.view, m.d_sgu.view,
                       m.d_sdown.view, y);
        EXPECT_TRUE(near(to_host(c, y), m.reference(in.h, in.logits, in.y0, m.egu_ref),
                         kBf16Reduction))
            << "block_cols " << bc;
    }
}

TEST(CudaMoeFp8, GroupedNegativeControl) {
    // The grouped route's result must not match the reference with the up rows on the gate
    // rows' scale rows.
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {16, 4, 272, 256, 160}, 770);
    const int64_t T = 40;
    const MoeInputs in = moe_inputs(m.d, T, 771);
    const Tensor dh = to_device(c, in.h, DType::BF16);
    const Tensor dlogits = to_device(c, in.logits, DType::F32);
    Allocator& a = ops::device_allocator(c.device);
    Tensor w = Tensor::empty(a, DType::F32, {T, m.d.k}), ids = Tensor::empty(a, DType::I32, {T, m.d.k});
    ops::moe_route(c, dlogits.view().narrow(1, 0, m.d.E), m.d.k, w, ids);
    Tensor y = to_device(c, in.y0, DType::BF16);
    ops::cuda::moe_experts_fp8(c, dh, m.d_egu.view, m.d_edown.view, ids, w, y);
    const Tensor out = to_host(c, y), hids = to_host(c, ids), hw = to_host(c, w);
    const auto reference = [&](const Tensor& gate_up) {
        Tensor ref = clone(in.y0);
        ops::moe_experts(kCpuRef, in.h, gate_up, m.edown_ref, hids, hw, ref);
        return ref;
    };
    EXPECT_TRUE(near(out, reference(m.egu_ref), kBf16Reduction));
    EXPECT_FALSE(near(out, reference(m.egu.dense(Dequant::UpScaleRowFromI)), kBf16Reduction));
    EXPECT_FALSE(near(out, reference(m.egu.dense(Dequant::NoScale)), kBf16Reduction));
}

TEST(CudaMoeFp8, NegativeControls) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeFp8 m(c, {16, 4, 272, 144, 160}, 580);
    const MoeInputs in = moe_inputs(m.d, 4, 581);
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
        const MoeInputs in = moe_inputs(m.d, 3, 591);
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
    const TensorView logits = logits_shape(h, d.E);
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits, d.k, dense_egu, m.d_edown.view,
                                                  m.d_sgu.view, m.d_sdown.view));
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits, d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, dense_sdown));
    // F32 activations with fp8 weights.
    const Tensor h32 = to_device(c, random_tensor({2, d.H}, 602), DType::F32);
    EXPECT_FALSE(m.fits(h32));
    // fp8 takes more pairs than the dense route (17 x 4 > 64), up to 192 (49 x 4 is past it).
    const Tensor h17 = to_device(c, random_tensor({17, d.H}, 603), DType::BF16);
    EXPECT_TRUE(m.fits(h17));
    const Tensor h48 = to_device(c, random_tensor({48, d.H}, 604), DType::BF16);
    EXPECT_TRUE(m.fits(h48));
    const Tensor h49 = to_device(c, random_tensor({49, d.H}, 605), DType::BF16);
    EXPECT_FALSE(m.fits(h49));

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
    EXPECT_TRUE(ops::cuda::moe_block_decode_fits(h264, logits_shape(h264, d.E), d.k, egu264,
                                                 edown264, sgu264, sdown264));
    // I = 136 and Is = 168: multiples of 8, not 16.
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 136, 160}, 620).fits(h));
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 144, 168}, 621).fits(h));

    // Block columns not a multiple of 16, and the four weights on different block sizes.
    EXPECT_FALSE(MoeFp8(c, {16, 4, 272, 144, 160, 128, 24}, 630).fits(h));
    const HostFp8 sdown64 = moe_weight({d.H, d.Is}, 64, 64, 631, scale_for(d.Is));
    const DeviceFp8 d_sdown64(c, sdown64);
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits_shape(h, d.E), d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, d_sdown64.view));
}

} // namespace
} // namespace ninfer::test
