// Expert parallelism (EngineOptions::expert_parallel, `--tensor-parallel N --expert-parallel`,
// model/tensor_parallel.h) on the CPU: each rank holds a run of whole routed experts (and 1/N of
// everything else, as under tensor parallelism); a rank runs the pairs routed to its experts
// and the layer's all-reduce combines them. For the MoE fixtures:
//   - the sharded model's logits equal one device's, and ranks that never combine are caught;
//   - greedy output equals one device's for 2 and 4 ranks, batched, preempted and from the
//     prefix cache, and with MTP speculation;
//   - FP8 and 4-bit checkpoints keep every rank's experts quantized (whole experts cut along
//     no scale block) and their output equals one device's.
// The layout (shard_config's runs, its refusals) and the planner's `ep:N` are checked directly.
#include <string>
#include <vector>

#include "model/convert.h"
#include "model/parallel_fixture.h"
#include "model/speculative_exactness.h"
#include "runtime/placement.h"

namespace ninfer::test {
namespace {

std::vector<Fixture> moe_fixtures() {
    std::vector<Fixture> out;
    for (Fixture& f : load_fixtures())
        if (io::load_hf_config(f.dir).moe) out.push_back(std::move(f));
    return out;
}

class ExpertParallel : public ::testing::TestWithParam<Fixture> {};

TEST_P(ExpertParallel, LogitsEqualOneDeviceAndASkippedCombineIsCaught) {
    const Fixture& f = GetParam();
    const std::vector<float> one = prompt_logits(f, 1);
    const std::vector<float> two = prompt_logits(f, 2, false, /*expert_parallel=*/true);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_LE(max_gap_relative(two, one), kScheduleLogitsRefRel) << f.name;
    EXPECT_GT(max_gap_relative(prompt_logits(f, 2, /*sabotage=*/true, true), one), 1e-2) << f.name;
}

TEST_P(ExpertParallel, GreedyOutputEqualsOneDevice) {
    const Fixture& f = GetParam();
    Engine single(parallel_options(f, 1));
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    const Generated want = run_one(single, greedy_request(prompt, 24));
    for (int ranks : {2, 4}) {
        ASSERT_TRUE(divides(f, ranks, true)) << f.name << " over " << ranks;
        Engine parallel(parallel_options(f, ranks, false, /*expert_parallel=*/true));
        EXPECT_TRUE(parallel.model_info().expert_parallel);
        expect_same_output(run_one(parallel, greedy_request(prompt, 24)).tokens, want.tokens,
                           kParallelCpu, f.name + " --expert-parallel over " +
                                             std::to_string(ranks));
    }
}

TEST_P(ExpertParallel, BatchedPreemptedAndCachedEqualSoloRuns) {
    const EngineOptions o = parallel_options(GetParam(), 2, true, /*expert_parallel=*/true);
    check_batching_and_preemption(o, GetParam(), kParallelCpu);
    check_prefix_cache_exactness(o, GetParam(), kParallelCpu);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExpertParallel, ::testing::ValuesIn(moe_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(ExpertParallelSpeculative, MtpKeepsThePlainOutput) {
    int checked = 0;
    for (const Fixture& f : mtp_fixtures()) {
        if (!io::load_hf_config(f.dir).moe) continue;
        EngineOptions o = parallel_options(f, 2, /*reference=*/true, /*expert_parallel=*/true);
        Speculation sp;
        sp.alone_ks = {1, 3};
        check_mtp_greedy_alone(o, f, kParallelCpu, sp);
        ++checked;
    }
    EXPECT_GT(checked, 0) << "no MoE fixture with an MTP head";
}

// Quantized checkpoints (fp8 with 32-row blocks, which split a TP rank's expert rows; q4): under
// expert parallelism every rank's experts stay quantized, and the output equals one device's.
TEST(ExpertParallelQuantized, ExpertsStayQuantizedAndOutputEqualsOneDevice) {
    for (const model::QuantFormat format : {model::QuantFormat::Fp8, model::QuantFormat::Q4}) {
        const bool fp8 = format == model::QuantFormat::Fp8;
        const std::filesystem::path dir = converted_moe(format, 32, fp8 ? "ep_fp8_b32" : "ep_q4_g8");
        const ops::ExecContext cpu = ops::ExecContext::cpu();
        const auto m = model::Qwen35Model::load_parallel(dir, {cpu, cpu},
                                                         ops::make_host_collectives(2),
                                                         model::Residency(true, true), {},
                                                         {/*expert_parallel=*/true});
        const io::ModelConfig full = io::load_hf_config(dir);
        EXPECT_EQ(m->config().held_experts(), full.num_experts / 2);
        for (const model::LayerWeights& l : m->weights().layers)
            for (const model::Weight* w : {&l.mlp.experts_gate_up, &l.mlp.experts_down}) {
                EXPECT_TRUE(fp8 ? w->is_fp8() : w->is_grouped()) << "an expert was dequantized";
                EXPECT_EQ(w->size(0), full.num_experts / 2);
            }
        expect_parallel_equals_single(dir.string(), "resident", fp8 ? "fp8 b32" : "q4",
                                      /*expert_parallel=*/true);
    }
}

TEST(ExpertParallelLayout, RunsOfWholeExpertsAndRefusals) {
    io::ModelConfig c = moe_35b_shapes();
    c.num_experts = 10;
    c.moe_intermediate_size = 96; // 96 / 4 = 24: not a multiple of a 128-block, whole under EP
    int64_t next = 0;
    for (int r = 0; r < 4; ++r) { // 10 experts over 4 ranks: runs of 2, 3, 2, 3
        const io::ModelConfig s = model::shard_config(c, {4, true}, r);
        EXPECT_EQ(s.first_held_expert, next) << r;
        EXPECT_EQ(s.held_experts(), r % 2 ? 3 : 2) << r;
        EXPECT_EQ(s.moe_intermediate_size, 96); // whole experts
        EXPECT_EQ(s.shared_expert_intermediate_size, 128);
        EXPECT_EQ(s.num_experts, 10); // the router's width
        next += s.held_experts();
    }
    EXPECT_EQ(next, 10);
    c.num_experts = 2;
    EXPECT_THROW(model::shard_config(c, {4, true}), Error); // a rank with no expert
    io::ModelConfig dense = c;
    dense.moe = false;
    dense.intermediate_size = 512;
    EXPECT_THROW(model::shard_config(dense, {2, true}), Error);
    // The engine refuses --expert-parallel without ranks, and on a dense model.
    for (const Fixture& f : load_fixtures()) {
        EngineOptions o = parallel_options(f, 1, false, /*expert_parallel=*/true);
        EXPECT_THROW(Engine{o}, Error) << f.name;
        if (io::load_hf_config(f.dir).moe) continue;
        o.tensor_parallel = 2;
        try {
            Engine e{o};
            ADD_FAILURE() << f.name << ": a dense model took --expert-parallel";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("dense"), std::string::npos) << e.what();
        }
    }
}

// The planner's ep:N: whole experts per rank (the most a rank holds), the same KV as tp:N.
TEST(ExpertParallelLayout, PlannerPlacesWholeExperts) {
    io::ModelConfig c = io::load_hf_config(moe_fixtures().front().dir);
    runtime::PlacementRequest r;
    r.mode = runtime::PlacementMode::Tensor;
    r.devices = 2;
    r.device_bytes = int64_t(1) << 30;
    const runtime::PlacementPlan tp = runtime::plan_placement(c, r);
    r.expert_parallel = true;
    const runtime::PlacementPlan ep = runtime::plan_placement(c, r);
    EXPECT_EQ(ep.devices[0].weight_bytes, tp.devices[0].weight_bytes); // 8 experts / 2: even
    EXPECT_EQ(ep.kv_tokens, tp.kv_tokens);
    bool named = false;
    for (const runtime::TensorHome& t : ep.tensors)
        named = named || t.share.find("experts 4..7") != std::string::npos;
    EXPECT_TRUE(named) << "rank 1's run of experts";
}

} // namespace
} // namespace ninfer::test
