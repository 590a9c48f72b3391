// Groupwise W8/Q4 weights on CUDA (ops/cuda/linear_grouped.h, label cuda) against the CPU
// reference on the weight dequantized on the host (code * scale in f32): the GEMV at every row
// count up to kGemvMaxRows, its repeated passes to 32 rows, the dequantize + cuBLAS route past
// them and for the shapes the GEMV refuses (groups that split a 16-byte load, K not a multiple of
// the codes per load, odd K); F16 and F32 scales, partial last groups, strided x and y, BF16 and
// F32 outputs, overwrite and accumulate. dequantize_grouped bit for bit against the host (2-D,
// and a 3-D stack whose unused experts are left untouched). And the converted fixtures with
// their projections and experts resident: logits within bf16 rounding of the CPU on the same
// codes, graphs replaying the routes exactly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/grouped_test_util.h"
#include "model/convert.h"
#include "model/fixture_util.h"
#include "model/groupwise.h"
#include "model/qwen3_5.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/cuda/linear_grouped.h"
#include "ops/linear.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;
using ops::cuda::kGemvMaxRows;

struct Case {
    int64_t T, K, N;
    int bits = 4;
    int64_t group = 32;
    DType scale = DType::F16;
    bool accumulate = false;
    DType y = DType::BF16;
    int64_t x_pad = 0, y_pad = 0; // x and y as column slices of wider tensors
};

std::string describe(const Case& s) {
    return "T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
           " bits=" + std::to_string(s.bits) + " group=" + std::to_string(s.group) +
           " scale=" + dtype_name(s.scale) + " accumulate=" + std::to_string(s.accumulate) +
           " y=" + dtype_name(s.y) + " pads=" + std::to_string(s.x_pad) + "," +
           std::to_string(s.y_pad);
}

// Runs ops::linear on the device and the CPU reference on the dequantized weight; returns whether
// the GEMV took the shape (every pass of it). The GEMV with an F32 y differs from the FP64
// reference by f32 accumulation only; the dequantize route multiplies the weight rounded to
// bf16, and with an F32 y matches the reference on that rounded weight to f32 accumulation.
bool check_linear_grouped(const Case& s) {
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(s.T * 1000003 + s.K * 1009 + s.N * 7 + s.group + s.bits);
    Tensor wide_x = rounded(random_tensor({s.T, s.K + s.x_pad}, seed, 1.0f), DType::BF16);
    const HostGrouped w(s.N, s.K, s.bits, s.group, s.scale, seed + 1);
    const Tensor dense = w.dense();
    Tensor wide_y = rounded(random_tensor({s.T, s.N + s.y_pad}, seed + 2, 0.5f), s.y);
    const Tensor x_ref = clone(wide_x.view().narrow(1, 0, s.K));
    Tensor ref = clone(wide_y), ref_bf16_w = clone(wide_y);
    ops::linear(kCpuRef, x_ref, dense, ref.view().narrow(1, 0, s.N), s.accumulate);
    ops::linear(kCpuRef, x_ref, rounded(dense, DType::BF16), ref_bf16_w.view().narrow(1, 0, s.N),
                s.accumulate);

    Tensor dwide_x = to_device(c, wide_x, DType::BF16);
    const DeviceGrouped dw(c, w);
    Tensor dwide_y = to_device(c, wide_y, s.y);
    const TensorView dx = dwide_x.view().narrow(1, 0, s.K);
    const TensorView dy = dwide_y.view().narrow(1, 0, s.N);
    bool gemv = s.T <= 32;
    for (int64_t t = 0; gemv && t < s.T; t += kGemvMaxRows)
        gemv = ops::cuda::linear_gemv_grouped_fits(dx.narrow(0, t, std::min(kGemvMaxRows, s.T - t)),
                                                   dw.view);
    ops::linear(c, dx, dw.view, dy, s.accumulate);
    const Tensor out = to_host(c, dwide_y);
    const std::string what = describe(s) + (gemv ? " route=gemv" : " route=dequantize");
    const Tolerance& tol = s.y == DType::BF16 ? kBf16Reduction : gemv ? kCudaF32 : kBf16Elementwise;
    EXPECT_TRUE(near(out, ref, tol)) << what;
    if (!gemv && s.y == DType::F32) {
        EXPECT_TRUE(near(out, ref_bf16_w, kCudaF32)) << "bf16-rounded weight, " << what;
    }
    // y's padding columns come back untouched.
    const int64_t width = s.N + s.y_pad;
    for (int64_t t = 0; t < s.T; ++t)
        for (int64_t n = s.N; n < width; ++n)
            EXPECT_EQ(out.ptr<float>()[t * width + n], wide_y.ptr<float>()[t * width + n])
                << "padding [" << t << ", " << n << "], " << what;
    return gemv;
}

TEST(CudaLinearGrouped, GemvEveryRowCountBothWidthsBothScales) {
    std::vector<int64_t> rows;
    for (int64_t T = 1; T <= kGemvMaxRows + 1; ++T) rows.push_back(T);
    for (int64_t T : {16, 31, 32, 33, 64}) rows.push_back(T);
    for (int64_t T : rows)
        for (int bits : {4, 8})
            for (DType scale : {DType::F16, DType::F32}) {
                const bool gemv = T <= 32;
                // K = 2048: whole unrolled steps; N = 257: not a multiple of the 8 warps a block.
                EXPECT_EQ(check_linear_grouped({T, 2048, 257, bits, 32, scale, true, DType::BF16}),
                          gemv);
                // K = 2080: a one-load tail past the unrolled step (q4: 32 columns, w8: 16 + 16);
                // groups of 64 leave a partial last group of 32.
                EXPECT_EQ(check_linear_grouped({T, 2080, 130, bits, 64, scale, false, DType::F32}),
                          gemv);
                // K = 96 < one step of a warp; strided x and y.
                EXPECT_EQ(
                    check_linear_grouped({T, 96, 130, bits, 32, scale, true, DType::F32, 8, 6}),
                    gemv);
            }
}

TEST(CudaLinearGrouped, ShapesTheGemvRefusesDequantize) {
    for (int64_t T : {1, 5}) {
        // Groups of 24 split a 16-byte load (w8: 16 codes, q4: 32); groups of 16 split a q4 load.
        EXPECT_FALSE(check_linear_grouped({T, 2048, 130, 8, 24, DType::F16, false, DType::F32}));
        EXPECT_FALSE(check_linear_grouped({T, 2048, 130, 4, 16, DType::F32, true, DType::F32}));
        // K = 77: odd (a padded last nibble) and not a multiple of a load.
        EXPECT_FALSE(check_linear_grouped({T, 77, 130, 4, 32, DType::F16, false, DType::F32}));
        EXPECT_FALSE(check_linear_grouped({T, 77, 130, 8, 32, DType::F16, true, DType::BF16}));
        // w8 with groups of 16 fits (16 codes a load); K = 2064 a 16-column tail.
        EXPECT_TRUE(check_linear_grouped({T, 2064, 130, 8, 16, DType::F16, false, DType::F32}));
    }
}

TEST(CudaLinearGrouped, DequantizeIsBitExact) {
    const auto c = cuda_ctx(DType::BF16);
    for (int bits : {4, 8})
        for (DType scale : {DType::F16, DType::F32})
            for (int64_t K : {77, 96, 2080}) {
                const HostGrouped w(130, K, bits, 32, scale, uint64_t(K + bits));
                const DeviceGrouped dw(c, w);
                Tensor out = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {130, K});
                ops::cuda::dequantize_grouped(c, dw.view, out);
                EXPECT_TRUE(near(to_host(c, out), rounded(w.dense(), DType::BF16), kExact))
                    << bits << " bits, K " << K << ", " << dtype_name(scale) << " scales";
            }
}

TEST(CudaLinearGrouped, DequantizeAStackSkipsUnusedExperts) {
    const auto c = cuda_ctx(DType::BF16);
    constexpr int64_t E = 4, N = 48, K = 96;
    const HostGrouped flat(E * N, K, 4, 32, DType::F16, 77); // the stack's rows, quantized
    Tensor codes3 = clone(flat.codes.view().reshape({E, N, K / 2}));
    Tensor scale3 = clone(flat.scale.view().reshape({E, N, K / 32}));
    Tensor dcodes = to_device(c, codes3, DType::U8), dscale = to_device(c, scale3, DType::F16);
    const auto w = ops::WeightView::grouped(dcodes.view(), dscale.view(), 4, 32, K);
    std::vector<int32_t> used = {1, 0, 1, 0};
    Tensor dused = to_device(c, TensorView::contiguous(used.data(), DType::I32, Device::cpu(), {E}),
                             DType::I32);
    Tensor marker = rounded(random_tensor({E, N, K}, 5, 1.0f), DType::BF16);
    Tensor out = to_device(c, marker, DType::BF16);
    ops::cuda::dequantize_grouped(c, w, out, dused);
    const Tensor got = to_host(c, out);
    const Tensor want = rounded(flat.dense(), DType::BF16);
    for (int64_t e = 0; e < E; ++e)
        for (int64_t i = 0; i < N * K; ++i) {
            const float g = got.ptr<float>()[e * N * K + i];
            const float x = used[size_t(e)] ? want.ptr<float>()[e * N * K + i]
                                            : marker.ptr<float>()[e * N * K + i];
            ASSERT_EQ(g, x) << "expert " << e << " element " << i;
        }
}

// The converted fixtures (ninfer convert --to q4 / w8) with their projections resident.
std::string converted(const std::string& fixture, model::QuantFormat format) {
    const fs::path out = scratch_path("ninfer_cuda_grouped_" + fixture +
                                      (format == model::QuantFormat::Q4 ? "_q4" : "_w8"));
    fs::remove_all(out);
    model::ConvertOptions o;
    o.format = format;
    model::convert_checkpoint(fs::path(fixtures_dir()) / fixture, out, o);
    return out.string();
}

bool any_grouped(const model::ModelWeights& w) {
    for (const model::LayerWeights& l : w.layers)
        if (l.attn.in_proj.is_grouped() || l.gdn.in_proj.is_grouped() || l.mlp.gate_up.is_grouped())
            return true;
    return false;
}

// Every MoE layer's routed and shared experts stayed groupwise (the composed moe_block route:
// the routed experts some pair uses dequantized to bf16 scratch, the shared expert by linear).
bool experts_grouped(const model::ModelWeights& w) {
    for (const model::LayerWeights& l : w.layers)
        if (l.mlp.experts_gate_up.defined() &&
            !(l.mlp.experts_gate_up.is_grouped() && l.mlp.experts_down.is_grouped() &&
              l.mlp.shared_gate_up.is_grouped() && l.mlp.shared_down.is_grouped()))
            return false;
    return true;
}

// Bound and schedule as test_cuda_fp8_model (cuda_test_util.h): bf16 rounding alone (the same
// codes dequantized at load to bf16) sets it, floored at kBf16LogitsFloor.

class CudaGroupedFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGroupedFixtures, ResidentLogitsTrackTheCpuOnTheSameCodes) {
    for (model::QuantFormat format : {model::QuantFormat::Q4, model::QuantFormat::W8}) {
        const std::string dir = converted(GetParam(), format);
        std::vector<int32_t> tokens;
        for (int i = 0; i < 24; ++i) tokens.push_back((i * 37 + 11) % 200);
        auto cpu_model = model::Qwen35Model::load(dir, ops::ExecContext::cpu());
        const auto cpu =
            logits_by_schedule(ops::ExecContext::cpu(), *cpu_model, tokens, kResidentSchedule);
        const auto ctx = cuda_ctx(DType::BF16);
        auto gpu_model = model::Qwen35Model::load(dir, ctx, model::Residency(false, true));
        ASSERT_TRUE(any_grouped(gpu_model->weights())) << "nothing stayed groupwise";
        ASSERT_TRUE(experts_grouped(gpu_model->weights())) << "MoE experts were dequantized";
        const auto gpu = logits_by_schedule(ctx, *gpu_model, tokens, kResidentSchedule);
        auto bf16_model = model::Qwen35Model::load(dir, ctx);
        ASSERT_FALSE(any_grouped(bf16_model->weights()));
        const auto bf16 = logits_by_schedule(ctx, *bf16_model, tokens, kResidentSchedule);
        const double bf16_dev = max_rel_diff(bf16, cpu), dev = max_rel_diff(gpu, cpu);
        EXPECT_LE(dev, std::max(kBf16LogitsFloor, kResidentVsBf16Factor * bf16_dev))
            << GetParam() << ": bf16 weights deviate " << bf16_dev;
        std::printf("%s %s: resident %.4f, bf16 weights %.4f (max |diff| / max |logit| vs CPU)\n",
                    GetParam().c_str(), format == model::QuantFormat::Q4 ? "q4" : "w8", dev,
                    bf16_dev);
    }
}

TEST_P(CudaGroupedFixtures, ResidentGraphReplayMatchesEager) {
    const std::string dir = converted(GetParam(), model::QuantFormat::Q4);
    std::vector<GeneratedToken> runs[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
        EngineOptions o = cuda_engine_options("bf16");
        o.model_dir = dir;
        o.group_weights = "resident";
        o.cuda_graphs = graphs == 1;
        Engine engine(o);
        std::vector<int32_t> prompt;
        for (int i = 0; i < 9; ++i) prompt.push_back((i * 13 + 3) % 200);
        runs[graphs] = generate(engine, greedy_request(prompt, 24));
    }
    ASSERT_EQ(ids_of(runs[1]), ids_of(runs[0]));
    for (size_t i = 0; i < runs[0].size(); ++i)
        EXPECT_NEAR(runs[1][i].logprob, runs[0][i].logprob, kLogprobScheduleAbs) << i;
}

// --group-weights auto (the default) keeps the codes on CUDA with bf16: the engine holds far fewer
// weight bytes than with dequantize, and resident gives the same bytes as auto.
TEST_P(CudaGroupedFixtures, AutoKeepsTheCodesOnCuda) {
    const std::string dir = converted(GetParam(), model::QuantFormat::Q4);
    auto weight_bytes = [&](const char* mode) {
        EngineOptions o = cuda_engine_options("bf16");
        o.model_dir = dir;
        if (mode) o.group_weights = mode;
        Engine engine(o);
        return engine.memory_stats().weights;
    };
    const int64_t by_default = weight_bytes(nullptr), resident = weight_bytes("resident");
    const int64_t dequantized = weight_bytes("dequantize");
    EXPECT_EQ(by_default, resident);
    EXPECT_LT(double(by_default), 0.8 * double(dequantized))
        << "auto " << by_default << " bytes, dequantize " << dequantized;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGroupedFixtures,
                         ::testing::Values(std::string("dense_text_sharded"),
                                           std::string("moe_vlm_per_expert")));

} // namespace
} // namespace ninfer::test
