// Helpers for the model tests: the committed HF fixtures and their reference outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/qwen3_5.h"
#include "ninfer/engine.h"
#include "ops/memory.h"
#include "runtime/kv_pool.h"
#include "runtime/state_pool.h"
#include "runtime/step_plan.h"

namespace ninfer::test {

struct ReferenceStep {
    int32_t id = 0;
    double logprob = 0;
    std::vector<std::pair<int32_t, double>> top; // HF top-5, best first
};

struct ReferenceCase {
    std::vector<int32_t> prompt;
    std::vector<ReferenceStep> steps;
};

struct Fixture {
    std::string name;
    std::string dir;
    std::vector<ReferenceCase> cases;
    // HF's own bf16 logits deviation from its f64 run on the long prompt (max |diff| / max
    // |logit|).
    double hf_bf16_logits_rel = 0;
};

// One step of a reference.json case: {"id", "logprob", "top": [[id, logprob], ...]}.
inline ReferenceStep parse_step(const nlohmann::json& s) {
    ReferenceStep st;
    st.id = s["id"].get<int32_t>();
    st.logprob = s["logprob"].get<double>();
    for (const auto& t : s["top"]) st.top.emplace_back(t[0].get<int32_t>(), t[1].get<double>());
    return st;
}

// A committed quantized fixture: tests/fixtures_quant/NAME (beside the HF fixtures).
inline std::string quant_fixture_dir(const std::string& name) {
    return (std::filesystem::path(fixtures_dir()) / ".." / "fixtures_quant" / name)
        .lexically_normal()
        .string();
}

inline std::vector<Fixture> load_fixtures() {
    std::vector<Fixture> out;
    for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir())) {
        const auto ref_path = entry.path() / "reference.json";
        if (!std::filesystem::exists(ref_path)) continue;
        std::ifstream in(ref_path);
        const nlohmann::json j = nlohmann::json::parse(in);
        Fixture f;
        f.name = entry.path().filename().string();
        f.dir = entry.path().string();
        f.hf_bf16_logits_rel = j.value("hf_bf16_logits_rel", 0.0);
        for (const auto& c : j["cases"]) {
            ReferenceCase rc;
            rc.prompt = c["prompt"].get<std::vector<int32_t>>();
            for (const auto& s : c["steps"]) rc.steps.push_back(parse_step(s));
            f.cases.push_back(std::move(rc));
        }
        out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(),
              [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
    return out;
}

inline void PrintTo(const Fixture& f, std::ostream* os) {
    *os << f.name;
}

// Every HF top-5 entry appears in ours with a close logprob, unless it sits at the rank-5
// boundary within tolerance (then a near-tie may legitimately swap it with rank 6).
inline void expect_top_logprobs_match(const GeneratedToken& ours, const ReferenceStep& ref,
                               const std::string& where) {
    ASSERT_EQ(ours.top_logprobs.size(), ref.top.size()) << where;
    const double boundary = ref.top.back().second;
    for (const auto& [id, lp] : ref.top) {
        auto it = std::find_if(ours.top_logprobs.begin(), ours.top_logprobs.end(),
                               [want = id](const TokenLogprob& t) { return t.id == want; });
        if (it == ours.top_logprobs.end()) {
            EXPECT_LE(std::fabs(lp - boundary), kLogprobVsHfAbs)
                << where << ": HF top id " << id << " missing from ninfer's top-5";
            continue;
        }
        EXPECT_NEAR(it->logprob, lp, kLogprobVsHfAbs) << where << ": id " << id;
    }
}

// Runs one request to completion and returns every token with its logprobs.
inline std::vector<GeneratedToken> generate(Engine& engine, const GenerationRequest& request,
                                            RequestUpdate* final_update = nullptr) {
    RequestStream stream = engine.submit(request);
    std::vector<GeneratedToken> tokens;
    RequestUpdate u;
    while (stream.next(u)) {
        tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
        if (u.finished && final_update) *final_update = u;
    }
    return tokens;
}

inline GenerationRequest greedy_request(const std::vector<int32_t>& prompt, int max_new,
                                        int top_logprobs = 5) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_new_tokens = max_new;
    r.sampling.greedy = true;
    r.top_logprobs = top_logprobs;
    r.ignore_eos = true;
    return r;
}

// A converted checkpoint loads in the engine and greedily generates 4 tokens with finite
// logprobs.
inline void expect_loads_and_generates(const std::filesystem::path& dir) {
    EngineOptions eo;
    eo.model_dir = dir.string();
    Engine engine(eo);
    const auto tokens = generate(engine, greedy_request({1, 2, 3, 4, 5}, 4));
    ASSERT_EQ(tokens.size(), 4u);
    for (const auto& t : tokens) EXPECT_TRUE(std::isfinite(t.logprob));
}

inline std::vector<int32_t> ids_of(const std::vector<GeneratedToken>& tokens) {
    std::vector<int32_t> ids;
    for (const auto& t : tokens) ids.push_back(t.id);
    return ids;
}

// Runs the model over `tokens` in consecutive chunks of the given sizes (one sequence, on ctx's
// device) and returns the logits of every row ([tokens, V] flattened, on the host).
inline std::vector<float> logits_by_schedule(const ops::ExecContext& ctx, model::Qwen35Model& m,
                                             const std::vector<int32_t>& tokens,
                                             const std::vector<int64_t>& chunks) {
    const int64_t V = m.config().vocab_size;
    runtime::KvPool kv(m.cache_spec(), 64, 16, ctx, ctx.dtype);
    runtime::StatePool states(m.cache_spec(), 2, ctx.device, ctx.dtype);
    runtime::Sequence seq;
    seq.tokens = tokens;
    seq.slot = 0;
    states.zero_row(ctx, 0);
    for (int32_t b = 0; b < int32_t((tokens.size() + 15) / 16); ++b) seq.blocks.push_back(b);
    runtime::StepBuffers buffers;
    Allocator& alloc = ops::device_allocator(ctx.device);
    std::vector<float> out;
    for (int64_t n : chunks) {
        runtime::StepPlan plan;
        plan.entries.push_back({&seq, n});
        model::ForwardBatch batch = runtime::build_forward_batch(ctx, plan, 16, buffers);
        std::vector<int32_t> rows(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = int32_t(i);
        Tensor d_rows = Tensor::empty(alloc, DType::I32, {n});
        ops::upload(ctx, TensorView::contiguous(rows.data(), DType::I32, Device::cpu(), {n}),
                    d_rows);
        batch.logit_rows = d_rows;
        Tensor logits = Tensor::empty(alloc, DType::F32, {n, V});
        m.forward(ctx, batch,
                  {kv.k_views(), kv.v_views(), states.conv_views(), states.recurrent_views(), {}, {}, {}, {}, {}},
                  logits);
        std::vector<float> host(static_cast<size_t>(n * V));
        ops::download(ctx, logits,
                      TensorView::contiguous(host.data(), DType::F32, Device::cpu(), {n, V}));
        out.insert(out.end(), host.begin(), host.end());
        seq.cached += n;
    }
    return out;
}

} // namespace ninfer::test
