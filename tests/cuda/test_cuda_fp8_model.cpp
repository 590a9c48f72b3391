// FP8 checkpoints with their projections resident as fp8 on CUDA (label cuda): the official-
// layout fixtures' logits, prompt and decode steps, stay within bf16 rounding of the CPU run on
// the dequantized weights; a random fp8 model whose four MoE weights are all fp8 (the fused fp8
// decode route) tracks the CPU's resident run; CUDA graphs replay the fp8 routes exactly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cuda/cuda_test_util.h"
#include "model/fixture_util.h"
#include "model/qwen3_5.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

// The bound of resident against CPU logits: cuda_test_util.h (kResidentVsBf16Factor times the
// deviation of the same model dequantized to bf16 at load, --fp8-weights dequantize).

std::vector<int32_t> prompt_of(int n, int mul, int add) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back((i * mul + add) % 200);
    return p;
}

bool any_fp8(const model::ModelWeights& w) {
    for (const model::LayerWeights& l : w.layers)
        if (l.mlp.experts_gate_up.is_fp8() || l.mlp.gate_up.is_fp8() || l.attn.o_proj.is_fp8())
            return true;
    return false;
}

// kResidentSchedule: the prompt in one chunk (many-row routes: dequantize + cuBLAS, routed
// experts dequantized), then four one-token steps (the fp8 GEMV and MoE decode routes).

class CudaFp8Fixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFp8Fixtures, ResidentLogitsTrackTheCpuOnTheDequantizedWeights) {
    const std::string dir = quant_fixture_dir(GetParam());
    const auto tokens = prompt_of(24, 37, 11);
    auto cpu_model = model::Qwen35Model::load(dir, ops::ExecContext::cpu());
    const auto cpu =
        logits_by_schedule(ops::ExecContext::cpu(), *cpu_model, tokens, kResidentSchedule);
    const auto ctx = cuda_ctx(DType::BF16);
    auto gpu_model = model::Qwen35Model::load(dir, ctx, /*fp8_resident=*/true);
    ASSERT_TRUE(any_fp8(gpu_model->weights())) << "nothing stayed fp8";
    const auto gpu = logits_by_schedule(ctx, *gpu_model, tokens, kResidentSchedule);
    auto bf16_model = model::Qwen35Model::load(dir, ctx, /*fp8_resident=*/false);
    ASSERT_FALSE(any_fp8(bf16_model->weights()));
    const auto bf16 = logits_by_schedule(ctx, *bf16_model, tokens, kResidentSchedule);
    ASSERT_EQ(gpu.size(), cpu.size());
    const double bf16_dev = max_rel_diff(bf16, cpu), fp8_dev = max_rel_diff(gpu, cpu);
    EXPECT_LE(fp8_dev, std::max(kBf16LogitsFloor, kResidentVsBf16Factor * bf16_dev))
        << GetParam() << ": bf16 weights deviate " << bf16_dev;
    std::printf("%s: resident fp8 %.4f, bf16 weights %.4f (max |diff| / max |logit| vs CPU)\n",
                GetParam().c_str(), fp8_dev, bf16_dev);
}

// Greedy decoding with graphs on and off: the same ids and logprobs (the fp8 routes captured).
TEST_P(CudaFp8Fixtures, ResidentGraphReplayMatchesEager) {
    std::vector<GeneratedToken> runs[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
        EngineOptions o = cuda_engine_options("bf16");
        o.model_dir = quant_fixture_dir(GetParam());
        o.fp8_weights = "resident";
        o.cuda_graphs = graphs == 1;
        Engine engine(o);
        runs[graphs] = generate(engine, greedy_request(prompt_of(9, 13, 3), 24));
    }
    ASSERT_EQ(ids_of(runs[1]), ids_of(runs[0]));
    for (size_t i = 0; i < runs[0].size(); ++i)
        EXPECT_NEAR(runs[1][i].logprob, runs[0][i].logprob, kLogprobScheduleAbs) << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFp8Fixtures,
                         ::testing::Values(std::string("moe_fp8"),
                                           std::string("dense_fp8_sharded")));

// Random fp8 weights in the official quantized set, all four MoE weights fp8: CUDA (bf16) and
// the CPU (f32, dequantizing in each op) run the same model.
TEST(CudaFp8RandomWeights, FusedFp8MoeDecodeTracksTheCpu) {
    const io::ModelConfig cfg = io::load_hf_config(quant_fixture_dir("moe_fp8"));
    const auto tokens = prompt_of(24, 41, 7);
    auto cpu_model = model::Qwen35Model::random(cfg, ops::ExecContext::cpu(), 9, true);
    const model::LayerWeights& l0 = cpu_model->weights().layers.front();
    ASSERT_TRUE(l0.mlp.experts_gate_up.is_fp8() && l0.mlp.experts_down.is_fp8() &&
                l0.mlp.shared_gate_up.is_fp8() && l0.mlp.shared_down.is_fp8());
    const auto cpu =
        logits_by_schedule(ops::ExecContext::cpu(), *cpu_model, tokens, kResidentSchedule);
    const auto ctx = cuda_ctx(DType::BF16);
    auto gpu_model = model::Qwen35Model::random(cfg, ctx, 9, true);
    const auto gpu = logits_by_schedule(ctx, *gpu_model, tokens, kResidentSchedule);
    ASSERT_EQ(gpu.size(), cpu.size());
    for (float v : gpu) ASSERT_TRUE(std::isfinite(v));
    // The bf16 yardstick of this config: the moe_fp8 fixture (the same shapes) dequantized to
    // bf16 at load, against the CPU, over the same schedule.
    auto fixture_cpu =
        model::Qwen35Model::load(quant_fixture_dir("moe_fp8"), ops::ExecContext::cpu());
    auto fixture_bf16 = model::Qwen35Model::load(quant_fixture_dir("moe_fp8"), ctx);
    const double bf16_dev = max_rel_diff(
        logits_by_schedule(ctx, *fixture_bf16, tokens, kResidentSchedule),
        logits_by_schedule(ops::ExecContext::cpu(), *fixture_cpu, tokens, kResidentSchedule));
    const double fp8_dev = max_rel_diff(gpu, cpu);
    std::printf("random fp8: resident fp8 %.4f vs CPU; the fixture's bf16 weights %.4f\n", fp8_dev,
                bf16_dev);
    EXPECT_LE(fp8_dev, std::max(kBf16LogitsFloor, kResidentVsBf16Factor * bf16_dev));
}

} // namespace
} // namespace ninfer::test
