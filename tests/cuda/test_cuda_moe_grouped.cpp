// moe_block's fused decode route with groupwise W8/Q4 weights (ops/cuda/moe_decode.cu with
// moe_decode_grouped.cuh, label cuda) against the CPU reference on the weights dequantized on the
// host (code * scale in f32, exact): Qwen3.6-35B-A3B's shapes (E = 256, top-8, H = 2048,
// I = Is = 512) in q4 g32 and w8 g64 at T = 1 .. 24 (192 pairs, the route's bound), F16 and F32
// scales, partial last groups, more than 256 experts, routed rows longer than one down batch;
// two runs and the dispatcher bit for bit; a graph replay; the shapes the route refuses (mixed
// formats, columns or groups that split a 16-byte load), which ops::moe_block still computes
// through the composition. Negative controls: the reference with the q4 nibbles read high first,
// or with every group on its row's first scale, must not match.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/grouped_test_util.h"
#include "cuda/moe_decode_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/memory.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

struct Format {
    int bits = 4;
    int64_t group = 32;
    DType scale = DType::F16;
};

struct Dims {
    int64_t E, k, H, I, Is;
};

std::string describe(const Dims& d, const Format& f, int64_t T) {
    return "T=" + std::to_string(T) + " E=" + std::to_string(d.E) + " k=" + std::to_string(d.k) +
           " H=" + std::to_string(d.H) + " I=" + std::to_string(d.I) +
           " Is=" + std::to_string(d.Is) + " bits=" + std::to_string(f.bits) +
           " group=" + std::to_string(f.group) + " scale=" + dtype_name(f.scale);
}

// A weight [.., N, K] with values of RMS 1 / sqrt(K): G h, U h and the block's output are O(1),
// as large as y's start values, so a wrong code or scale anywhere moves y by O(1).
HostGrouped moe_weight(const std::vector<int64_t>& dims, const Format& f, uint64_t seed) {
    return HostGrouped(dims, f.bits, f.group, f.scale, seed, 1.0f / std::sqrt(float(dims.back())));
}

// One MoE block's four groupwise weights on the host (with their dense F32 references) and the
// device.
struct MoeGrouped : MoeDecodeCalls<MoeGrouped> {
    Dims d;
    Format f;
    HostGrouped egu, edown, sgu, sdown;
    Tensor egu_ref, edown_ref, sgu_ref, sdown_ref;
    DeviceGrouped d_egu, d_edown, d_sgu, d_sdown;

    MoeGrouped(const ops::ExecContext& c, const Dims& dims, const Format& format, uint64_t seed)
        : d(dims), f(format), egu(moe_weight({d.E, 2 * d.I, d.H}, f, seed)),
          edown(moe_weight({d.E, d.H, d.I}, f, seed + 1)),
          sgu(moe_weight({2 * d.Is, d.H}, f, seed + 2)),
          sdown(moe_weight({d.H, d.Is}, f, seed + 3)), egu_ref(egu.dense()),
          edown_ref(edown.dense()), sgu_ref(sgu.dense()), sdown_ref(sdown.dense()), d_egu(c, egu),
          d_edown(c, edown), d_sgu(c, sgu), d_sdown(c, sdown) {}
};

// One case of the groupwise decode route (check_decode_case).
Tensor check_case(const ops::ExecContext& c, const MoeGrouped& m, int64_t T, uint64_t seed) {
    return check_decode_case(c, m, T, seed, describe(m.d, m.f, T));
}

// ops::moe_block on shapes the fused route refuses: the composition, against the reference.
void check_composed(const ops::ExecContext& c, const MoeGrouped& m, int64_t T, uint64_t seed) {
    const std::string what = "composed " + describe(m.d, m.f, T);
    const MoeInputs in = moe_inputs(m.d, T, seed);
    const Tensor dh = to_device(c, in.h, DType::BF16);
    EXPECT_FALSE(m.fits(dh)) << what;
    const Tensor dlogits = to_device(c, in.logits, DType::F32);
    Tensor y = to_device(c, in.y0, DType::BF16);
    ops::moe_block(c, dh, dlogits, m.d.k, m.d_egu.view, m.d_edown.view, m.d_sgu.view,
                   m.d_sdown.view, y);
    // The composition multiplies the weights rounded to bf16 (dequantize_grouped).
    EXPECT_TRUE(near(to_host(c, y), m.reference(in.h, in.logits, in.y0, m.egu_ref),
                     kBf16Reduction))
        << what;
}

const Dims k35b{256, 8, 2048, 512, 512};

// Expert parallelism: runs of held q4 experts on the fused route (T = 2) and the composition
// (T = 64: past the route's 192 pairs; only the held experts some pair uses are dequantized).
TEST(CudaMoeGrouped, HeldExpertRuns) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeGrouped m(c, {16, 4, 256, 128, 128}, Format{4, 32, DType::F16}, 710);
    check_held_runs(c, m, 2, 711, "q4 fused");
    check_held_runs(c, m, 7, 713, "q4 fused, T = 7");
    check_held_runs(c, m, 64, 712, "q4 composed");
}

TEST(CudaMoeGrouped, Qwen35bShapesQ4) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeGrouped m(c, k35b, {4, 32, DType::F16}, 800);
    for (int64_t T : {1, 2, 8, 16, 24}) check_case(c, m, T, 810 + uint64_t(T));
}

// A row's bits do not depend on the other rows of the call (the 35B's shapes, q4, T = 7).
TEST(CudaMoeGrouped, RowsEqualThemselvesAlone) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeGrouped m(c, k35b, {4, 32, DType::F16}, 860);
    check_rows_equal_alone(c, m, 7, 861, "q4 35B");
}

TEST(CudaMoeGrouped, Qwen35bShapesW8) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeGrouped m(c, k35b, {8, 64, DType::F16}, 840);
    for (int64_t T : {1, 3, 24}) check_case(c, m, T, 850 + uint64_t(T));
}

TEST(CudaMoeGrouped, ScaleDtypesGroupsAndPartialGroups) {
    const auto c = cuda_ctx(DType::BF16);
    // H = 288, I = 160, Is = 224 (I != Is: idle up blocks; 9 of the 32 lanes load a q4 row of
    // H); groups of 96 (q4) and 48 (w8) leave a partial last group on I and Is.
    const Dims d{16, 4, 288, 160, 224};
    for (const Format& f : {Format{4, 32, DType::F32}, Format{4, 64, DType::F16},
                            Format{4, 96, DType::F16}, Format{8, 16, DType::F32},
                            Format{8, 48, DType::F16}, Format{8, 64, DType::F32}}) {
        const MoeGrouped m(c, d, f, 870 + uint64_t(f.bits * 100 + f.group));
        for (int64_t T : {1, 5}) check_case(c, m, T, 880 + uint64_t(T));
    }
}

TEST(CudaMoeGrouped, ManyExpertsAndLongRows) {
    const auto c = cuda_ctx(DType::BF16);
    // E > 256: the route keeps 16 logits per lane (the other up-kernel instance).
    check_case(c, MoeGrouped(c, {320, 8, 256, 128, 128}, {4, 32, DType::F16}, 900), 2, 901);
    // q4 I = Is = 2080: 3 load steps of 1,024 codes per routed row, 24 per column at top-8 (two
    // down batches), and the shared row past its prefetch; w8 I = 1040 the same in steps of 512.
    const MoeGrouped q4(c, {16, 8, 128, 2080, 2080}, {4, 32, DType::F16}, 910);
    for (int64_t T : {1, 4}) check_case(c, q4, T, 911 + uint64_t(T));
    const MoeGrouped w8(c, {16, 8, 128, 1040, 1040}, {8, 64, DType::F16}, 920);
    for (int64_t T : {1, 4}) check_case(c, w8, T, 921 + uint64_t(T));
}

TEST(CudaMoeGrouped, GraphReplayEqualsEagerBitForBit) {
    const auto base = cuda_ctx(DType::BF16);
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    {
        const MoeGrouped m(c, {16, 8, 288, 160, 224}, {4, 32, DType::F16}, 930);
        const MoeInputs in = moe_inputs(m.d, 3, 931);
        const Tensor dh = to_device(c, in.h, DType::BF16);
        const Tensor dlogits = to_device(c, in.logits, DType::F32);
        Tensor y = to_device(c, in.y0, DType::BF16);
        ASSERT_TRUE(m.fits(dh));
        expect_replays_equal_eager(
            c, in.y0, y, [&] { m.run(c, dh, dlogits, y); }, "q4 T=3");
        ops::synchronize(c);
    }
    ops::bind_device(base);
}

TEST(CudaMoeGrouped, ShapesTheRouteRefusesTakeTheComposition) {
    const auto c = cuda_ctx(DType::BF16);
    const Dims d{16, 4, 288, 160, 224};
    const MoeGrouped m(c, d, {4, 32, DType::F16}, 940);
    const Tensor h = to_device(c, rounded(random_tensor({2, d.H}, 941), DType::BF16), DType::BF16);
    EXPECT_TRUE(m.fits(h));
    // Up to 192 pairs (48 x 4), not past.
    EXPECT_TRUE(m.fits(to_device(c, random_tensor({48, d.H}, 942), DType::BF16)));
    EXPECT_FALSE(m.fits(to_device(c, random_tensor({49, d.H}, 943), DType::BF16)));
    // F32 activations.
    EXPECT_FALSE(m.fits(to_device(c, random_tensor({2, d.H}, 944), DType::F32)));
    // Mixed: a dense shared expert; a w8 shared expert beside q4 experts; F32 scales beside F16.
    const Tensor dense_sdown = to_device(c, rounded(m.sdown_ref, DType::BF16), DType::BF16);
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits_shape(h, d.E), d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, dense_sdown));
    const DeviceGrouped w8_sdown(c, moe_weight({d.H, d.Is}, {8, 64, DType::F16}, 945));
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits_shape(h, d.E), d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, w8_sdown.view));
    const DeviceGrouped f32_sdown(c, moe_weight({d.H, d.Is}, {4, 32, DType::F32}, 946));
    EXPECT_FALSE(ops::cuda::moe_block_decode_fits(h, logits_shape(h, d.E), d.k, m.d_egu.view, m.d_edown.view,
                                                  m.d_sgu.view, f32_sdown.view));
    // Groups that split a 16-byte load (w8 groups of 24, q4 groups of 16), and q4 columns that
    // are multiples of 16 but not of 32 (H = 272): the composition computes them.
    check_composed(c, MoeGrouped(c, d, {8, 24, DType::F16}, 950), 3, 951);
    check_composed(c, MoeGrouped(c, d, {4, 16, DType::F16}, 952), 3, 953);
    check_composed(c, MoeGrouped(c, {16, 4, 272, 160, 224}, {4, 32, DType::F16}, 954), 3, 955);
}

// The dense reference of w with a sabotaged layout: q4 nibbles read high first, or every group of
// a row on the row's first scale.
enum class Sabotage { NibblesHighFirst, FirstScaleOfRow };
Tensor sabotaged_dense(const HostGrouped& w, Sabotage s) {
    const Tensor codes = clone(w.codes), scale = clone(w.scale);
    const TensorView cv = codes.view(), sv = scale.view();
    if (s == Sabotage::NibblesHighFirst) {
        auto* q = static_cast<uint8_t*>(cv.data);
        for (int64_t i = 0; i < cv.numel(); ++i) q[i] = uint8_t((q[i] >> 4) | (q[i] << 4));
    } else {
        const int64_t groups = sv.size(sv.ndim - 1), elem = dtype_size(sv.dtype);
        auto* p = static_cast<uint8_t*>(sv.data);
        for (int64_t r = 0; r < sv.numel() / groups; ++r)
            for (int64_t g = 1; g < groups; ++g)
                std::copy(p + r * groups * elem, p + (r * groups + 1) * elem,
                          p + (r * groups + g) * elem);
    }
    const ops::HostDense d =
        ops::dense_on_host(ops::WeightView::grouped(cv, sv, w.bits, w.group, w.K));
    return clone(d.view);
}

TEST(CudaMoeGrouped, NegativeControls) {
    const auto c = cuda_ctx(DType::BF16);
    const MoeGrouped m(c, {16, 4, 288, 160, 224}, {4, 32, DType::F16}, 960);
    const MoeInputs in = moe_inputs(m.d, 4, 961);
    const Tensor out = check_case(c, m, 4, 961);
    for (Sabotage s : {Sabotage::NibblesHighFirst, Sabotage::FirstScaleOfRow})
        EXPECT_FALSE(near(out, m.reference(in.h, in.logits, in.y0, sabotaged_dense(m.egu, s)),
                          kBf16Reduction))
            << int(s);
}

} // namespace
} // namespace ninfer::test
