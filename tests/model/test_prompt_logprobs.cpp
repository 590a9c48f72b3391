// GenerationRequest::prompt_logprobs: the engine reports log p(prompt[i] | prompt[..i]) for
// i >= 1. Checked against HF (scoring prompt + HF's greedy continuation gives HF's logprobs of
// that continuation), against the engine's own generated-token logprobs, across prefill chunk
// sizes and concurrent requests; max_new_tokens == 0 scores without generating.
#include <cmath>

#include "model/fixture_util.h"

namespace ninfer::test {
namespace {

struct Scored {
    std::vector<TokenLogprob> prompt;
    std::vector<GeneratedToken> tokens;
    RequestUpdate last;
};

Scored drain(RequestStream stream) {
    Scored s;
    RequestUpdate u;
    while (stream.next(u)) {
        s.prompt.insert(s.prompt.end(), u.prompt_logprobs.begin(), u.prompt_logprobs.end());
        EXPECT_TRUE(u.prompt_logprobs.empty() || s.tokens.empty()) << "scores after tokens";
        s.tokens.insert(s.tokens.end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) s.last = u;
    }
    return s;
}

GenerationRequest scoring(const std::vector<int32_t>& prompt, int max_new = 0) {
    GenerationRequest r = greedy_request(prompt, max_new, 0);
    r.prompt_logprobs = true;
    return r;
}

EngineOptions options(const Fixture& f, int prefill_chunk) {
    EngineOptions o;
    o.model_dir = f.dir;
    o.max_context = 512;
    o.prefill_chunk = prefill_chunk;
    return o;
}

class PromptLogprobs : public ::testing::TestWithParam<Fixture> {};

TEST_P(PromptLogprobs, MatchHfOnItsGreedyContinuation) {
    const Fixture& f = GetParam();
    Engine engine(options(f, 512));
    for (const ReferenceCase& c : f.cases) {
        std::vector<int32_t> text = c.prompt;
        for (size_t i = 0; i + 1 < c.steps.size(); ++i) text.push_back(c.steps[i].id);
        const Scored s = drain(engine.submit(scoring(text)));
        ASSERT_EQ(s.prompt.size(), text.size() - 1);
        EXPECT_TRUE(s.tokens.empty());
        EXPECT_EQ(s.last.reason, FinishReason::Length);
        for (size_t i = 0; i < s.prompt.size(); ++i) EXPECT_EQ(s.prompt[i].id, text[i + 1]);
        for (size_t i = 0; i + 1 < c.steps.size(); ++i)
            EXPECT_NEAR(s.prompt[c.prompt.size() - 1 + i].logprob, c.steps[i].logprob,
                        kLogprobVsHfAbs)
                << f.name << " prompt " << c.prompt.size() << " step " << i;
    }
}

TEST_P(PromptLogprobs, IndependentOfScheduleAndEqualToGeneratedLogprobs) {
    const Fixture& f = GetParam();
    const ReferenceCase& c = f.cases.back(); // the 150-token prompt: several GDN chunks
    Engine whole(options(f, 512));
    Engine chunked(options(f, 7));
    const Scored a = drain(whole.submit(scoring(c.prompt, 6)));
    // Two at once on the chunked engine: a plain request beside the scoring one, queued
    // together so that their schedule does not depend on thread timing.
    std::vector<RequestStream> both =
        chunked.submit_all({greedy_request(c.prompt, 6, 0), scoring(c.prompt, 6)});
    const Scored b = drain(std::move(both[1]));
    const Scored p = drain(std::move(both[0]));
    ASSERT_EQ(a.prompt.size(), c.prompt.size() - 1);
    ASSERT_EQ(b.prompt.size(), a.prompt.size());
    for (size_t i = 0; i < a.prompt.size(); ++i) {
        EXPECT_EQ(b.prompt[i].id, a.prompt[i].id);
        EXPECT_NEAR(b.prompt[i].logprob, a.prompt[i].logprob, kLogprobScheduleAbs) << i;
    }
    EXPECT_EQ(ids_of(a.tokens), ids_of(b.tokens));
    EXPECT_EQ(ids_of(p.tokens), ids_of(b.tokens));
    EXPECT_TRUE(p.prompt.empty());
    // Scoring prompt + generated tokens reproduces the logprobs reported while generating.
    std::vector<int32_t> text = c.prompt;
    for (const auto& t : a.tokens) text.push_back(t.id);
    const Scored again = drain(chunked.submit(scoring(text)));
    for (size_t i = 0; i < a.tokens.size(); ++i)
        EXPECT_NEAR(again.prompt[c.prompt.size() - 1 + i].logprob, a.tokens[i].logprob,
                    kLogprobScheduleAbs)
            << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PromptLogprobs, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& p) { return p.param.name; });

TEST(PromptLogprobsEdge, OneTokenPromptScoresNothing) {
    const Fixture f = load_fixtures().front();
    Engine engine(options(f, 512));
    const Scored s = drain(engine.submit(scoring({f.cases[0].prompt[0]})));
    EXPECT_TRUE(s.prompt.empty());
    EXPECT_TRUE(s.tokens.empty());
    EXPECT_EQ(s.last.reason, FinishReason::Length);
    const Scored g = drain(engine.submit(scoring({f.cases[0].prompt[0]}, 2)));
    EXPECT_TRUE(g.prompt.empty());
    EXPECT_EQ(g.tokens.size(), 2u);
}

// A scoring request that is preempted and recomputed reports each prompt token once (the
// recomputed rows are not scored again), with the values of a solo run.
TEST(PromptLogprobsEdge, PreemptedRequestsScoreEachTokenOnce) {
    const Fixture f = load_fixtures().front();
    std::vector<int32_t> prompt = f.cases.back().prompt;
    for (size_t i = 0; prompt.size() < 140; ++i) prompt.push_back(prompt[i]);
    EngineOptions solo_options = options(f, 32);
    Engine solo(solo_options);
    const Scored want = drain(solo.submit(scoring(prompt, 4)));
    ASSERT_EQ(want.prompt.size(), prompt.size() - 1);
    EngineOptions o = options(f, 32);
    o.max_context = 160;
    o.kv_cache_tokens = 12 * 16; // four 144-token requests do not fit at once
    o.max_batch_tokens = 64;
    Engine engine(o);
    std::vector<GenerationRequest> requests(4, scoring(prompt, 4));
    int preemptions = 0;
    for (auto& stream : engine.submit_all(requests)) {
        const Scored got = drain(std::move(stream));
        preemptions += got.last.timings.preemptions;
        ASSERT_EQ(got.prompt.size(), prompt.size() - 1) << "prompt scores reported again";
        for (size_t i = 0; i < got.prompt.size(); ++i) {
            EXPECT_EQ(got.prompt[i].id, want.prompt[i].id);
            EXPECT_NEAR(got.prompt[i].logprob, want.prompt[i].logprob, 1e-3) << i;
        }
    }
    EXPECT_GT(preemptions, 0) << "nothing was preempted: the test does not test";
}

} // namespace
} // namespace ninfer::test
