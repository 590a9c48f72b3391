// What the tensor- and expert-parallel model tests share (test_tensor_parallel.cpp,
// test_expert_parallel.cpp): engine options over N CPU ranks, whether a fixture's layout divides,
// a collective that forgets to sum (the sabotage arm), and one prompt's logits through a sharded
// model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/convert.h"
#include "model/fixture_util.h"
#include "model/qwen3_5.h"
#include "model/serving_exactness.h"
#include "model/tensor_parallel.h"
#include "ops/collective.h"
#include "runtime/kv_pool.h"
#include "runtime/state_pool.h"
#include "runtime/step_plan.h"

namespace ninfer::test {

// Two ranks sum their partial products in another order than one device's GEMM: logprobs agree
// as two schedules of one engine do.
inline const Comparison kParallelCpu{kLogprobScheduleAbs, 0};

inline EngineOptions parallel_options(const Fixture& f, int ranks, bool reference = false,
                                      bool expert_parallel = false) {
    EngineOptions o;
    o.model_dir = f.dir;
    o.tensor_parallel = ranks;
    o.cpu_reference = reference;
    o.expert_parallel = expert_parallel;
    return o;
}

// Whether the fixture's heads and rows divide into `ranks` (shard_config accepts the layout).
inline bool divides(const Fixture& f, int ranks, bool expert_parallel = false) {
    try {
        model::shard_config(io::load_hf_config(f.dir), {ranks, expert_parallel});
        return true;
    } catch (const Error&) {
        return false;
    }
}

// A collective that forgets a step: the sabotage arms of the logits check (no sum) and of the
// split proposal head (no gather: rank 0's output keeps what it held).
enum class Skip { Reduce, Gather };
class Sabotaged final : public ops::Collective {
public:
    Sabotaged(std::shared_ptr<ops::Collective> inner, Skip skip)
        : inner_(std::move(inner)), skip_(skip) {}
    int rank() const override { return inner_->rank(); }
    int ranks() const override { return inner_->ranks(); }
    void abort() override { inner_->abort(); }
    void reset() override { inner_->reset(); }
    std::string backend() const override { return "sabotaged"; }
    bool capturable() const override { return false; }

protected:
    void reduce(const ops::ExecContext& ctx, const TensorView& x) override {
        if (skip_ != Skip::Reduce) inner_->all_reduce_sum(ctx, x);
    }
    void gather(const ops::ExecContext& ctx, const TensorView& part, const TensorView& full,
                int root) override {
        if (skip_ != Skip::Gather) inner_->gather_columns(ctx, part, full, root);
    }

private:
    std::shared_ptr<ops::Collective> inner_;
    Skip skip_;
};

// Every row's logits of one prompt in one forward, the model over `ranks` CPU ranks (1: the
// ordinary single-device model; expert_parallel: the layout's), each rank with pools of its
// shard's shapes.
inline std::vector<float> prompt_logits(const Fixture& f, int ranks, bool sabotage = false,
                                        bool expert_parallel = false) {
    const ops::ExecContext ctx = ops::ExecContext::cpu(ops::CpuMode::Reference);
    std::unique_ptr<model::Qwen35Model> m;
    if (ranks == 1) {
        m = model::Qwen35Model::load(f.dir, ctx);
    } else {
        std::vector<std::shared_ptr<ops::Collective>> c = ops::make_host_collectives(ranks);
        if (sabotage)
            for (auto& one : c) one = std::make_shared<Sabotaged>(one, Skip::Reduce);
        m = model::Qwen35Model::load_parallel(f.dir,
                                              std::vector<ops::ExecContext>(size_t(ranks), ctx),
                                              c, {}, {}, {expert_parallel});
    }
    const std::vector<int32_t> tokens = f.cases.front().prompt;
    const int64_t n = int64_t(tokens.size()), V = m->config().vocab_size;
    std::vector<std::unique_ptr<runtime::KvPool>> kv;
    std::vector<std::unique_ptr<runtime::StatePool>> states;
    std::vector<model::CacheViews> views;
    for (int r = 0; r < ranks; ++r) {
        kv.push_back(std::make_unique<runtime::KvPool>(m->cache_spec(), 64, 16, ctx, ctx.dtype));
        states.push_back(std::make_unique<runtime::StatePool>(m->cache_spec(), 2, ctx.device, ctx.dtype));
        states.back()->zero_row(ctx, 0);
        views.push_back({kv.back()->k_views(), kv.back()->v_views(), states.back()->conv_views(),
                         states.back()->recurrent_views(), {}, {}, {}, {}, {}});
    }
    model::CacheViews caches = views[0];
    caches.peer_ranks.assign(views.begin() + 1, views.end());
    runtime::Sequence seq;
    seq.tokens = tokens;
    seq.slot = 0;
    for (int32_t b = 0; b < int32_t((n + 15) / 16); ++b) seq.blocks.push_back(b);
    runtime::StepPlan plan;
    plan.entries.push_back({&seq, n});
    runtime::StepBuffers buffers;
    model::ForwardBatch batch = runtime::build_forward_batch(ctx, plan, 16, buffers);
    std::vector<int32_t> rows(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = int32_t(i);
    batch.logit_rows = TensorView::contiguous(rows.data(), DType::I32, Device::cpu(), {n});
    std::vector<float> logits(size_t(n * V));
    m->forward(ctx, batch, caches,
               TensorView::contiguous(logits.data(), DType::F32, Device::cpu(), {n, V}));
    return logits;
}

// The 35B-A3B's heads and MoE widths (256 experts, 512 wide), for the layout's arithmetic.
inline io::ModelConfig moe_35b_shapes() {
    io::ModelConfig c;
    c.num_heads = 16;
    c.num_kv_heads = 2;
    c.linear_num_key_heads = 16;
    c.linear_num_value_heads = 32;
    c.moe = true;
    c.num_experts = 256;
    c.moe_intermediate_size = 512;
    c.shared_expert_intermediate_size = 512;
    return c;
}

// Greedy output of a quantized checkpoint under TP=2 (with expert parallelism when asked) equals
// one device's, both with the given residency (the CPU dequantizes resident weights in every op).
inline void expect_parallel_equals_single(const std::string& dir, const std::string& residency,
                                          const std::string& what, bool expert_parallel = false) {
    EngineOptions one;
    one.model_dir = dir;
    one.fp8_weights = residency;
    one.group_weights = residency;
    Engine single(one);
    const std::vector<int32_t> prompt = {1, 5, 9, 14, 30, 2, 7, 11, 3, 8};
    const Generated want = run_one(single, greedy_request(prompt, 16));
    EngineOptions o = one;
    o.tensor_parallel = 2;
    o.expert_parallel = expert_parallel;
    Engine parallel(o);
    expect_same_output(run_one(parallel, greedy_request(prompt, 16)).tokens, want.tokens,
                       kParallelCpu,
                       what + " " + residency + " --tensor-parallel 2" +
                           (expert_parallel ? " --expert-parallel" : ""));
}

// The moe_text_fused fixture converted (ninfer convert) to fp8 with block x block scale blocks,
// or q4 with groups of 8, under the scratch folder `name`.
inline std::filesystem::path converted_moe(model::QuantFormat format, int64_t block,
                                           const std::string& name) {
    Fixture moe;
    for (const Fixture& f : load_fixtures())
        if (f.name == "moe_text_fused") moe = f;
    require(!moe.dir.empty(), "the moe_text_fused fixture is missing");
    model::ConvertOptions c;
    c.format = format;
    c.block = block;
    c.group = 8;
    const std::filesystem::path dir = scratch_path(name);
    std::filesystem::remove_all(dir);
    model::convert_checkpoint(moe.dir, dir, c);
    return dir;
}

} // namespace ninfer::test
