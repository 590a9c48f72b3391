// Tensor parallelism (EngineOptions::tensor_parallel, model/tensor_parallel.h) on the CPU: every
// rank a CPU context with its own thread, shard and pools, the host-staged collective between
// them. For every fixture (dense and MoE, KV and GDN key heads split or copied):
//   - the sharded model's logits equal one device's to the schedule tolerance, and a sabotaged
//     collective (no all-reduce) is caught;
//   - greedy output and logprobs equal one device's for 2 ranks (and 4 where the heads divide);
//   - batching, preemption and the prefix cache (cold vs hit, chat turns, the host tier) give
//     their single-device guarantees.
// The layout's arithmetic (rank_range, shared_heads, shard_config's errors) and the collective's
// failure handling are checked directly.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "model/dflash_fixture.h"
#include "model/serving_exactness.h"
#include "model/speculative_exactness.h"
#include "model/convert.h"
#include "model/parallel_fixture.h"
#include "model/tensor_parallel.h"
#include "ops/collective.h"
#include "runtime/kv_pool.h"
#include "runtime/state_pool.h"

namespace ninfer::test {
namespace {

class TensorParallel : public ::testing::TestWithParam<Fixture> {};

TEST_P(TensorParallel, LogitsEqualOneDeviceAndASkippedReduceIsCaught) {
    const Fixture& f = GetParam();
    const std::vector<float> one = prompt_logits(f, 1);
    const std::vector<float> two = prompt_logits(f, 2);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_LE(max_gap_relative(two, one), kScheduleLogitsRefRel) << f.name;
    // Sabotage: ranks that never sum their partial products compute another model.
    EXPECT_GT(max_gap_relative(prompt_logits(f, 2, /*sabotage=*/true), one), 1e-2) << f.name;
}

TEST_P(TensorParallel, GreedyOutputEqualsOneDevice) {
    const Fixture& f = GetParam();
    Engine single(parallel_options(f, 1));
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    const Generated want = run_one(single, greedy_request(prompt, 24));
    for (int ranks : {2, 4}) {
        if (!divides(f, ranks)) continue; // the layout test covers the refusal
        Engine parallel(parallel_options(f, ranks));
        EXPECT_EQ(parallel.model_info().tensor_parallel, ranks);
        EXPECT_EQ(parallel.model_info().collective, "host");
        expect_same_output(run_one(parallel, greedy_request(prompt, 24)).tokens, want.tokens,
                           kParallelCpu, f.name + " --tensor-parallel " + std::to_string(ranks));
    }
}

// Quantized KV caches: every rank's pools hold its heads' codes and scales. On the reference ops,
// as the quantized-KV serving tests (a code rounds a last-bit difference of its input to a whole
// step: the fast ops' sums, ordered otherwise under TP, may round a code the other way; so may
// the reference's all-reduced partial sums, kLogprobScheduleRecomputedKvAbs).
TEST_P(TensorParallel, QuantizedKvEqualsOneDevice) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    for (const char* kv : {"int8", "fp8"}) {
        EngineOptions one = parallel_options(f, 1, /*reference=*/true);
        one.kv_dtype = kv;
        Engine single(one);
        const Generated want = run_one(single, greedy_request(prompt, 16));
        EngineOptions o = one;
        o.tensor_parallel = 2;
        Engine parallel(o);
        expect_same_output(run_one(parallel, greedy_request(prompt, 16)).tokens, want.tokens,
                           {kLogprobScheduleRecomputedKvAbs, 0}, f.name + " --kv-dtype " + kv);
    }
}

// A bf16 GDN state (--gdn-state-dtype bf16): each rank's pool holds its value heads' state in bf16,
// rounded at the same stores as one device's, so the output is one device's.
TEST_P(TensorParallel, Bf16GdnStateEqualsOneDevice) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    EngineOptions one = parallel_options(f, 1, /*reference=*/true);
    one.gdn_state_dtype = "bf16";
    Engine single(one);
    const Generated want = run_one(single, greedy_request(prompt, 16));
    EngineOptions o = one;
    o.tensor_parallel = 2;
    Engine parallel(o);
    EXPECT_EQ(parallel.stats().gdn_state_dtype, "bf16");
    expect_same_output(run_one(parallel, greedy_request(prompt, 16)).tokens, want.tokens,
                       kParallelCpu, f.name + " --gdn-state-dtype bf16");
}

TEST_P(TensorParallel, BatchedAndPreemptedEqualSoloRuns) {
    check_batching_and_preemption(parallel_options(GetParam(), 2, true), GetParam(),
                                  kParallelCpu);
}

TEST_P(TensorParallel, PrefixCacheHitsEqualColdRuns) {
    check_prefix_cache_exactness(parallel_options(GetParam(), 2, true), GetParam(),
                                 kParallelCpu);
}

TEST_P(TensorParallel, HostTierRestoresEveryRanksState) {
    check_host_tier(parallel_options(GetParam(), 2, true), GetParam(), kParallelCpu);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallel, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

// Official-layout FP8 checkpoints (32-row blocks here: some of a rank's runs split a block and
// are dequantized exactly, the others stay fp8), dequantized or resident.
TEST(TensorParallelQuantized, Fp8CheckpointsEqualOneDevice) {
    for (const char* name : {"moe_fp8", "dense_fp8_sharded"})
        for (const char* residency : {"dequantize", "resident"})
            expect_parallel_equals_single(quant_fixture_dir(name), residency, name);
}

// Checkpoints whose blocks and groups line up with every rank's runs (fp8 with 8-row blocks, q4
// with groups of 8): each rank's projections stay quantized, cut along the scale grid, and the
// output equals one device's.
TEST(TensorParallelQuantized, AlignedShardsStayQuantized) {
    for (const model::QuantFormat format : {model::QuantFormat::Fp8, model::QuantFormat::Q4}) {
        const bool fp8 = format == model::QuantFormat::Fp8;
        const std::filesystem::path dir = converted_moe(format, 8, fp8 ? "tp_fp8_b8" : "tp_q4_g8");
        const ops::ExecContext cpu = ops::ExecContext::cpu();
        const auto m = model::Qwen35Model::load_parallel(
            dir, {cpu, cpu}, ops::make_host_collectives(2), model::Residency(true, true));
        for (const model::LayerWeights& l : m->weights().layers) {
            const model::Weight& mixer = l.kind == io::LayerKind::FullAttention ? l.attn.o_proj
                                                                                : l.gdn.out_proj;
            for (const model::Weight* w : {&mixer, &l.mlp.experts_gate_up, &l.mlp.experts_down,
                                           &l.mlp.shared_down})
                EXPECT_TRUE(fp8 ? w->is_fp8() : w->is_grouped()) << "a shard was dequantized";
        }
        expect_parallel_equals_single(dir.string(), "resident", fp8 ? "fp8 b8" : "q4 g8");
    }
}

TEST(TensorParallelLayout, RangesAndSharedHeads) {
    EXPECT_EQ(model::rank_range(10, 0, 3).begin, 0);
    EXPECT_EQ(model::rank_range(10, 0, 3).count, 3);
    EXPECT_EQ(model::rank_range(10, 2, 3).begin, 6);
    EXPECT_EQ(model::rank_range(10, 2, 3).count, 4);
    // 8 KV heads over 4 ranks: two each; 2 over 8: each copied on 4 ranks.
    EXPECT_EQ(model::shared_heads(8, 3, 4).begin, 6);
    EXPECT_EQ(model::shared_heads(8, 3, 4).count, 2);
    EXPECT_EQ(model::shared_heads(2, 3, 8).begin, 0);
    EXPECT_EQ(model::shared_heads(2, 4, 8).begin, 1);
    EXPECT_EQ(model::shared_heads(2, 4, 8).count, 1);
}

TEST(TensorParallelLayout, ShardConfigDividesOrNamesWhatDoesNot) {
    io::ModelConfig c = moe_35b_shapes();
    const io::ModelConfig s = model::shard_config(c, {4}); // the 35B's shapes at TP=4
    EXPECT_EQ(s.num_heads, 4);
    EXPECT_EQ(s.num_kv_heads, 1); // copied: 2 KV heads, 4 ranks
    EXPECT_EQ(s.linear_num_key_heads, 4);
    EXPECT_EQ(s.linear_num_value_heads, 8);
    EXPECT_EQ(s.moe_intermediate_size, 128);
    try {
        model::shard_config(c, {3});
        FAIL() << "16 heads split 3 ways";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("num_attention_heads (16)"), std::string::npos)
            << e.what();
    }
    c.num_kv_heads = 3;
    EXPECT_THROW(model::shard_config(c, {2}), Error); // neither divides the other
    // The engine refuses a layout before loading.
    EngineOptions o;
    o.model_dir = load_fixtures().front().dir;
    o.tensor_parallel = 3;
    EXPECT_THROW(Engine{o}, Error);
}

// Speculative decoding under TP: the MTP module's layers run sharded on every rank (its KV in
// every rank's pools), the DFlash drafter on rank 0 from rank 0's whole residual taps; both
// propose through the split head (each rank its vocabulary rows, gathered on rank 0). Greedy
// output equals plain decoding under TP, alone for several K, and batched and from the prefix
// cache.
TEST(TensorParallelSpeculative, MtpKeepsThePlainOutput) {
    for (const Fixture& f : mtp_fixtures()) {
        EngineOptions o = parallel_options(f, 2, /*reference=*/true);
        Speculation sp;
        sp.alone_ks = {1, 3, 0};
        check_mtp_greedy_alone(o, f, kParallelCpu, sp);
        check_mtp_batched_and_cached(o, f, 3, kParallelCpu);
    }
}

TEST(TensorParallelSpeculative, DFlashKeepsThePlainOutput) {
    for (const Fixture& f : load_fixtures()) {
        if (!divides(f, 2)) continue;
        for (bool v2 : {false, true}) {
            const auto dir = scratch_path("tp_dflash_" + f.name + (v2 ? "_v2" : "_v1"));
            DrafterShape shape;
            shape.v2 = v2;
            write_random_drafter(dir, io::load_hf_config(f.dir), shape);
            Speculation sp;
            sp.method = v2 ? "dflash2" : "dflash";
            sp.draft_model = dir.string();
            sp.alone_ks = {3, 7};
            check_mtp_greedy_alone(parallel_options(f, 2, /*reference=*/true), f, kParallelCpu, sp);
        }
    }
}

TEST(TensorParallelCollective, HostSumsInRankOrderAndGathersColumns) {
    constexpr int N = 3;
    auto group = ops::make_host_collectives(N);
    const ops::ExecContext ctx = ops::ExecContext::cpu();
    std::vector<std::vector<float>> x(N, std::vector<float>(5)), parts(N);
    std::vector<float> full(2 * 6, -1.0f);
    std::vector<std::thread> threads;
    for (int r = 0; r < N; ++r)
        threads.emplace_back([&, r] {
            for (int i = 0; i < 5; ++i) x[size_t(r)][size_t(i)] = float(r * 10 + i);
            group[size_t(r)]->all_reduce_sum(
                ctx, TensorView::contiguous(x[size_t(r)].data(), DType::F32, Device::cpu(), {5}));
            parts[size_t(r)].assign(size_t(2 * (r + 1)), float(r)); // widths 1, 2, 3
            group[size_t(r)]->gather_columns(
                ctx,
                TensorView::contiguous(parts[size_t(r)].data(), DType::F32, Device::cpu(),
                                       {2, r + 1}),
                r == 0 ? TensorView::contiguous(full.data(), DType::F32, Device::cpu(), {2, 6})
                       : TensorView{},
                0);
        });
    for (auto& t : threads) t.join();
    for (int r = 0; r < N; ++r)
        for (int i = 0; i < 5; ++i) EXPECT_EQ(x[size_t(r)][size_t(i)], float(30 + 3 * i));
    EXPECT_EQ(full, (std::vector<float>{0, 1, 1, 2, 2, 2, 0, 1, 1, 2, 2, 2}));
}

TEST(TensorParallelCollective, AFailingRankFreesTheOthersAndTheGroupRecovers) {
    constexpr int N = 3;
    auto group = ops::make_host_collectives(N);
    model::RankThreads threads(N, group[0]);
    const ops::ExecContext ctx = ops::ExecContext::cpu();
    std::vector<std::vector<float>> x(N, std::vector<float>(4, 1.0f));
    auto reduce = [&](int r) {
        group[size_t(r)]->all_reduce_sum(
            ctx, TensorView::contiguous(x[size_t(r)].data(), DType::F32, Device::cpu(), {4}));
    };
    try {
        threads.run([&](int r) {
            if (r == 1) fail_invalid("rank 1 broke");
            reduce(r);
        });
        FAIL() << "a failing rank went unnoticed";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "rank 1 broke"); // the cause, not "abandoned"
    }
    threads.run(reduce); // usable again
    EXPECT_EQ(x[2][0], 3.0f);
}

} // namespace
} // namespace ninfer::test
