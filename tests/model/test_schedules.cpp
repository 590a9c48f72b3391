// The same tokens along different schedules give the same logits: one full-sequence pass,
// prefill then one-token decode steps, chunked continuation, any --prefill-chunk, and several
// requests batched together. Also: seeded sampling replays, penalties and logit_bias act,
// non-finite logits end a request.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "io/safetensors.h"
#include "model/fixture_util.h"
#include "model/qwen3_5.h"
#include "ops/memory.h"
#include "runtime/kv_pool.h"
#include "runtime/state_pool.h"
#include "runtime/step_plan.h"

namespace ninfer::test {
namespace {

const ops::ExecContext kCpu = ops::ExecContext::cpu();
const ops::ExecContext kCpuRef = ops::ExecContext::cpu(ops::CpuMode::Reference);

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
    return m;
}

class Schedules : public ::testing::TestWithParam<Fixture> {};

double max_abs(const std::vector<float>& a) {
    double m = 0;
    for (float v : a) m = std::max(m, std::fabs(double(v)));
    return m;
}

// Full sequence in one pass vs prefill + one-token decode steps vs chunks of 3 (the GDN chunk
// form continuing from a cached state): logits of every row, relative to the largest logit.
void check_schedules(const ops::ExecContext& ctx, const Fixture& f, double tolerance) {
    auto m = model::Qwen35Model::load(f.dir, ctx);
    for (const ReferenceCase& c : f.cases) {
        std::vector<int32_t> tokens = c.prompt;
        for (const auto& s : c.steps) tokens.push_back(s.id);
        const int64_t n = int64_t(tokens.size()), p = int64_t(c.prompt.size());
        const auto full = logits_by_schedule(ctx, *m, tokens, {n});
        std::vector<int64_t> decode{p};
        decode.resize(size_t(1 + n - p), 1);
        std::vector<int64_t> threes;
        for (int64_t done = 0; done < n; done += 3)
            threes.push_back(std::min<int64_t>(3, n - done));
        const double scale = max_abs(full);
        EXPECT_LE(max_abs_diff(logits_by_schedule(ctx, *m, tokens, decode), full) / scale,
                  tolerance)
            << f.name << " prompt " << p << " prefill + decode";
        EXPECT_LE(max_abs_diff(logits_by_schedule(ctx, *m, tokens, threes), full) / scale,
                  tolerance)
            << f.name << " prompt " << p << " chunks of 3";
    }
}

TEST_P(Schedules, PrefillThenDecodeEqualsFullSequenceReference) {
    check_schedules(kCpuRef, GetParam(), kScheduleLogitsRefRel);
}

TEST_P(Schedules, PrefillThenDecodeEqualsFullSequenceFast) {
    check_schedules(kCpu, GetParam(), kScheduleLogitsF32Rel);
}

TEST_P(Schedules, PrefillChunkSizeDoesNotChangeOutput) {
    const Fixture& f = GetParam();
    const ReferenceCase& c = f.cases.back(); // the long prompt
    std::vector<std::vector<GeneratedToken>> runs;
    for (int chunk : {1, 7, 64, 65, 512}) {
        EngineOptions o;
        o.model_dir = f.dir;
        o.prefill_chunk = chunk;
        Engine engine(o);
        runs.push_back(generate(engine, greedy_request(c.prompt, 12)));
    }
    for (size_t r = 1; r < runs.size(); ++r) {
        ASSERT_EQ(ids_of(runs[r]), ids_of(runs[0])) << "run " << r;
        for (size_t i = 0; i < runs[0].size(); ++i)
            EXPECT_NEAR(runs[r][i].logprob, runs[0][i].logprob, kLogprobScheduleAbs);
    }
}

TEST_P(Schedules, ConcurrentRequestsMatchSoloRuns) {
    const Fixture& f = GetParam();
    EngineOptions o;
    o.model_dir = f.dir;
    o.prefill_chunk = 16;
    o.max_batch_tokens = 40;
    Engine engine(o);
    std::vector<std::vector<int32_t>> solo;
    for (const auto& c : f.cases)
        solo.push_back(ids_of(generate(engine, greedy_request(c.prompt, 10))));
    const EngineStats after_solo = engine.stats();
    EXPECT_EQ(after_solo.max_step_sequences, 1); // one request at a time: never batched
    // All prompts at once, twice over: they share steps (ragged batches of chunks and decodes).
    std::vector<RequestStream> streams;
    for (int rep = 0; rep < 2; ++rep)
        for (const auto& c : f.cases)
            streams.push_back(engine.submit(greedy_request(c.prompt, 10)));
    for (size_t i = 0; i < streams.size(); ++i) {
        std::vector<int32_t> ids;
        RequestUpdate u;
        while (streams[i].next(u))
            for (const auto& t : u.tokens) ids.push_back(t.id);
        EXPECT_EQ(ids, solo[i % f.cases.size()]) << "request " << i;
    }
    // They really shared steps: more than one sequence in a step, and fewer steps than the
    // solo runs of the same requests took.
    const EngineStats s = engine.stats();
    EXPECT_GE(s.max_step_sequences, 2);
    EXPECT_LT(s.steps - after_solo.steps, 2 * after_solo.steps);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Schedules, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

Fixture first_fixture() {
    return load_fixtures().front();
}

TEST(Sampling, SeededRunsReplayExactly) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r;
    r.prompt = first_fixture().cases[0].prompt;
    r.max_new_tokens = 20;
    r.sampling.temperature = 1.3f;
    r.sampling.top_p = 0.9f;
    r.sampling.top_k = 50;
    r.sampling.seed = 1234;
    const auto a = ids_of(generate(engine, r));
    const auto b = ids_of(generate(engine, r));
    EXPECT_EQ(a, b);
    r.sampling.seed = 1235;
    EXPECT_NE(ids_of(generate(engine, r)), a);
}

TEST(Sampling, UnseededRequestReportsItsSeedAndReplaysWithIt) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r;
    r.prompt = first_fixture().cases[0].prompt;
    r.max_new_tokens = 16;
    RequestUpdate last;
    const auto a = ids_of(generate(engine, r, &last));
    r.sampling.seed = last.seed;
    EXPECT_EQ(ids_of(generate(engine, r)), a);
}

TEST(Sampling, PenaltiesChangeTheOutput) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r = greedy_request(first_fixture().cases[0].prompt, 24, 0);
    const auto plain = ids_of(generate(engine, r));
    r.sampling.presence_penalty = 2.0f;
    r.sampling.frequency_penalty = 2.0f;
    const auto penalized = ids_of(generate(engine, r));
    EXPECT_NE(plain, penalized);
    // With strong presence and frequency penalties no generated token repeats soon.
    std::set<int32_t> unique(penalized.begin(), penalized.end());
    EXPECT_GT(unique.size(), std::set<int32_t>(plain.begin(), plain.end()).size());
}

// OpenAI's logit_bias: +100 on a token the model never picks makes greedy decoding pick it every
// step; -100 on the first greedy token makes the runner-up win, reported with its raw logprob
// (the bias acts on what is sampled, never on the reported distribution); sampled requests never
// draw a banned token.
TEST(Sampling, LogitBiasForcesBansAndKeepsRawLogprobs) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    const GenerationRequest base = greedy_request(first_fixture().cases[0].prompt, 12, 2);
    const std::vector<GeneratedToken> plain = generate(engine, base);
    ASSERT_EQ(plain.size(), 12u);
    // A greedy token's logprob is its top entry's, bit for bit (ops/logits.h's rounding).
    for (const GeneratedToken& t : plain) {
        ASSERT_FALSE(t.top_logprobs.empty());
        EXPECT_EQ(t.id, t.top_logprobs[0].id);
        EXPECT_EQ(t.logprob, t.top_logprobs[0].logprob);
    }
    const std::vector<int32_t> plain_ids = ids_of(plain);
    int32_t unused = 0;
    while (std::find(plain_ids.begin(), plain_ids.end(), unused) != plain_ids.end()) ++unused;

    GenerationRequest forced = base;
    forced.sampling.logit_bias = {{unused, 100.0f}};
    EXPECT_EQ(ids_of(generate(engine, forced)), std::vector<int32_t>(12, unused));

    GenerationRequest banned = base;
    banned.max_new_tokens = 1;
    banned.sampling.logit_bias = {{plain_ids[0], -100.0f}};
    const std::vector<GeneratedToken> second = generate(engine, banned);
    ASSERT_EQ(second.size(), 1u);
    ASSERT_EQ(plain[0].top_logprobs.size(), 2u);
    EXPECT_EQ(second[0].id, plain[0].top_logprobs[1].id);
    EXPECT_EQ(second[0].logprob, plain[0].top_logprobs[1].logprob);

    GenerationRequest sampled = base;
    sampled.sampling.greedy = false;
    sampled.sampling.temperature = 1.0f;
    for (const GeneratedToken& t : plain) sampled.sampling.logit_bias.push_back({t.id, -100.0f});
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        sampled.sampling.seed = seed;
        for (int32_t id : ids_of(generate(engine, sampled)))
            EXPECT_EQ(std::find(plain_ids.begin(), plain_ids.end(), id), plain_ids.end())
                << "banned token " << id << " sampled (seed " << seed << ")";
    }
}

// allowed_token_ids (vLLM's): greedy and sampled requests draw only the listed ids.
TEST(Sampling, AllowedTokenIdsRestrictSampling) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r = greedy_request(first_fixture().cases[0].prompt, 10, 0);
    const std::vector<int32_t> plain = ids_of(generate(engine, r));
    const std::vector<int32_t> only = {plain[0] + 1, plain[0] + 2, 5}; // not the plain pick
    r.sampling.allowed_token_ids = only;
    const auto in_only = [&](int32_t id) {
        return std::find(only.begin(), only.end(), id) != only.end();
    };
    for (int32_t id : ids_of(generate(engine, r))) EXPECT_TRUE(in_only(id)) << id;
    r.sampling.greedy = false;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        r.sampling.seed = seed;
        for (int32_t id : ids_of(generate(engine, r))) EXPECT_TRUE(in_only(id)) << id;
    }
}

TEST(Engine, StopTokenEndsTheRequest) {
    const Fixture f = first_fixture();
    EngineOptions o;
    o.model_dir = f.dir;
    Engine engine(o);
    GenerationRequest r = greedy_request(f.cases[0].prompt, 24, 0);
    r.stop_token_ids = {f.cases[0].steps[3].id};
    RequestUpdate last;
    const auto ids = ids_of(generate(engine, r, &last));
    EXPECT_EQ(last.reason, FinishReason::Stop);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), f.cases[0].steps[3].id);
    EXPECT_LE(ids.size(), 4u);
}

// min_new_tokens (vLLM's min_tokens): the stop id that ends the plain run at its 4th token cannot
// be sampled before the 8th, so the request runs on past it (with MTP: test_speculative.cpp).
TEST(Engine, MinNewTokensHoldsBackStopIds) {
    const Fixture f = first_fixture();
    EngineOptions o;
    o.model_dir = f.dir;
    Engine engine(o);
    GenerationRequest r = greedy_request(f.cases[0].prompt, 24, 0);
    const int32_t stop = f.cases[0].steps[3].id;
    r.stop_token_ids = {stop};
    const auto plain = ids_of(generate(engine, r));
    ASSERT_LE(plain.size(), 4u);
    r.min_new_tokens = 8;
    RequestUpdate last;
    const auto held = ids_of(generate(engine, r, &last));
    ASSERT_GE(held.size(), 8u);
    for (size_t i = 0; i < 7; ++i) EXPECT_NE(held[i], stop) << "stop id sampled at " << i;
    EXPECT_EQ(std::vector<int32_t>(held.begin(), held.begin() + int64_t(plain.size()) - 1),
              std::vector<int32_t>(plain.begin(), plain.end() - 1)); // the same until the stop
    if (last.reason == FinishReason::Stop) {
        EXPECT_EQ(held.back(), stop);
    }
}

TEST(Engine, InvalidRequestsAreRejected) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r;
    EXPECT_THROW(engine.submit(r), Error); // empty prompt
    r.prompt = {1, 2, int32_t(engine.model_info().token_limit)};
    EXPECT_THROW(engine.submit(r), Error); // id out of range
    r.prompt = {1, 2};
    r.sampling.top_p = 0.0f;
    EXPECT_THROW(engine.submit(r), Error);
    r.sampling.top_p = 1.0f;
    r.sampling.temperature = NAN;
    EXPECT_THROW(engine.submit(r), Error);
    r.sampling.temperature = 1.0f;
    r.sampling.logit_bias = {{int32_t(engine.model_info().token_limit), 1.0f}};
    EXPECT_THROW(engine.submit(r), Error); // not a token
    r.sampling.logit_bias = {{1, 100.5f}};
    EXPECT_THROW(engine.submit(r), Error); // outside [-100, 100]
    r.sampling.logit_bias = {{1, NAN}};
    EXPECT_THROW(engine.submit(r), Error);
    r.sampling.logit_bias.clear();
    r.sampling.allowed_token_ids = {1, int32_t(engine.model_info().token_limit)};
    EXPECT_THROW(engine.submit(r), Error); // not a token
    r.sampling.allowed_token_ids.clear();
    r.max_new_tokens = 4;
    r.min_new_tokens = 5;
    EXPECT_THROW(engine.submit(r), Error); // min_new_tokens past max_new_tokens
}

TEST(Engine, CancelEndsARequest) {
    EngineOptions o;
    o.model_dir = first_fixture().dir;
    Engine engine(o);
    GenerationRequest r = greedy_request(first_fixture().cases[0].prompt, 4000, 0);
    RequestStream s = engine.submit(r);
    s.cancel();
    RequestUpdate u, last;
    while (s.next(u))
        if (u.finished) last = u;
    EXPECT_EQ(last.reason, FinishReason::Cancelled);
}

// Copies a fixture and overwrites one tensor of its safetensors file with NaN.
std::string fixture_with_nan(const Fixture& f, const std::string& tensor) {
    namespace fs = std::filesystem;
    const fs::path dir = scratch_path("ninfer_nan_" + f.name);
    fs::remove_all(dir);
    fs::copy(f.dir, dir);
    const fs::path file = dir / "model.safetensors";
    std::vector<uint8_t> bytes;
    {
        std::ifstream in(file, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    for (const auto& e :
         io::parse_safetensors(bytes.data(), int64_t(bytes.size()), file.string())) {
        if (e.name != tensor) continue;
        const float nan = NAN;
        auto* p = const_cast<uint8_t*>(static_cast<const uint8_t*>(e.data));
        EXPECT_EQ(e.dtype, DType::F32);
        std::memcpy(p, &nan, sizeof nan);
    }
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return dir.string();
}

TEST(Engine, NonFiniteLogitsEndTheRequestWithAnError) {
    Fixture f;
    for (const auto& x : load_fixtures())
        if (x.name == "moe_text_fused") f = x; // the F32 fixture
    ASSERT_FALSE(f.dir.empty());
    EngineOptions o;
    o.model_dir = fixture_with_nan(f, "model.norm.weight");
    Engine engine(o);
    RequestUpdate last;
    const auto tokens = generate(engine, greedy_request(f.cases[0].prompt, 5, 0), &last);
    EXPECT_TRUE(tokens.empty());
    EXPECT_EQ(last.reason, FinishReason::Error);
    EXPECT_NE(last.error.find("non-finite"), std::string::npos) << last.error;
    std::filesystem::remove_all(o.model_dir);
}

} // namespace
} // namespace ninfer::test
