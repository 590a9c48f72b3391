// The Engine API seams the server relies on: a TokenConstraint restricts sampled ids (greedy and
// sampled, with penalties) and sees every accepted id; a constraint that allows nothing or
// throws ends the request with an error; next_for() times out while a request waits and drains
// the same tokens as next(); stats() reports the load.
#include <set>

#include "model/fixture_util.h"

namespace ninfer::test {
namespace {

struct AllowSet : TokenConstraint {
    std::set<int32_t> ids;
    std::vector<int32_t> accepted;
    bool throw_on_allowed = false;
    void allowed(std::vector<uint8_t>& mask) override {
        if (throw_on_allowed) throw std::runtime_error("boom");
        for (int32_t id : ids) mask[size_t(id)] = 1;
    }
    void accept(int32_t id) override { accepted.push_back(id); }
};

EngineOptions tiny_options() {
    EngineOptions o;
    o.model_dir = load_fixtures().front().dir;
    o.max_context = 512;
    return o;
}

GenerationRequest request(int max_new) {
    GenerationRequest r;
    r.prompt = load_fixtures().front().cases[0].prompt;
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    return r;
}

std::vector<int32_t> drain(RequestStream s, RequestUpdate* last = nullptr) {
    std::vector<int32_t> ids;
    RequestUpdate u;
    while (s.next(u)) {
        for (const auto& t : u.tokens) ids.push_back(t.id);
        if (u.finished && last) *last = u;
    }
    return ids;
}

TEST(EngineApi, ConstraintRestrictsSampledIds) {
    Engine engine(tiny_options());
    for (bool greedy : {true, false}) {
        auto c = std::make_shared<AllowSet>();
        c->ids = {5, 17, 42};
        GenerationRequest r = request(24);
        r.sampling.greedy = greedy;
        r.sampling.temperature = 1.5f;
        r.sampling.presence_penalty = 1.0f;
        r.sampling.seed = 9;
        r.top_logprobs = 3;
        r.constraint = c;
        const std::vector<int32_t> ids = drain(engine.submit(r));
        ASSERT_EQ(ids.size(), 24u);
        for (int32_t id : ids) EXPECT_TRUE(c->ids.count(id)) << id;
        EXPECT_EQ(c->accepted, ids);
    }
}

TEST(EngineApi, ConstraintKeepsRawLogprobs) {
    Engine engine(tiny_options());
    GenerationRequest r = request(1);
    r.sampling.greedy = true;
    r.top_logprobs = 1;
    RequestUpdate u;
    RequestStream free_run = engine.submit(r);
    ASSERT_TRUE(free_run.next(u));
    const GeneratedToken best = u.tokens.at(0);
    auto c = std::make_shared<AllowSet>();
    c->ids = {best.id == 7 ? 8 : 7};
    r.constraint = c;
    RequestStream masked = engine.submit(r);
    ASSERT_TRUE(masked.next(u));
    EXPECT_EQ(u.tokens.at(0).id, *c->ids.begin());
    EXPECT_LT(u.tokens.at(0).logprob, best.logprob);
    EXPECT_EQ(u.tokens.at(0).top_logprobs.at(0).id, best.id); // raw top alternative
}

TEST(EngineApi, EmptyOrFailingConstraintEndsWithError) {
    Engine engine(tiny_options());
    for (bool throws : {false, true}) {
        auto c = std::make_shared<AllowSet>();
        c->throw_on_allowed = throws;
        GenerationRequest r = request(8);
        r.constraint = c;
        RequestUpdate last;
        EXPECT_TRUE(drain(engine.submit(r), &last).empty());
        EXPECT_EQ(last.reason, FinishReason::Error);
        EXPECT_NE(last.error.find(throws ? "boom" : "allows no token"), std::string::npos);
    }
    EXPECT_EQ(drain(engine.submit(request(3))).size(), 3u); // the engine goes on
}

TEST(EngineApi, NextForTimesOutWhileQueuedAndDrainsLikeNext) {
    EngineOptions o = tiny_options();
    o.max_sequences = 1;
    Engine engine(o);
    RequestStream first = engine.submit(request(400));
    GenerationRequest second_req = request(6);
    second_req.sampling.greedy = true;
    RequestStream second = engine.submit(second_req);
    RequestUpdate u;
    EXPECT_EQ(second.next_for(u, std::chrono::milliseconds(0)), RequestStream::Wait::Timeout);
    EXPECT_GE(engine.stats().waiting + engine.stats().active, 1);
    EXPECT_EQ(engine.stats().state_slots_total, 1);
    first.cancel();
    std::vector<int32_t> ids;
    RequestStream::Wait w;
    while ((w = second.next_for(u, std::chrono::milliseconds(50))) != RequestStream::Wait::Done)
        if (w == RequestStream::Wait::Update)
            for (const auto& t : u.tokens) ids.push_back(t.id);
    EXPECT_EQ(ids, drain(engine.submit(second_req)));
    drain(first);
}

TEST(EngineApi, SubmitAllQueuesEveryRequestOrNone) {
    Engine engine(tiny_options());
    std::vector<GenerationRequest> batch;
    for (int i = 0; i < 3; ++i) {
        GenerationRequest r = request(4 + i);
        r.sampling.greedy = true;
        r.prompt[0] = int32_t((r.prompt[0] + i) % engine.model_info().token_limit);
        batch.push_back(r);
    }
    std::vector<std::vector<int32_t>> alone;
    for (const auto& r : batch) alone.push_back(drain(engine.submit(r)));
    std::vector<RequestStream> streams = engine.submit_all(batch);
    ASSERT_EQ(streams.size(), batch.size());
    for (size_t i = 0; i < streams.size(); ++i) EXPECT_EQ(drain(streams[i]), alone[i]) << i;
    // One invalid request (an empty prompt) rejects the whole batch before anything is queued:
    // no request id was taken (ids count up by one per queued request).
    const uint64_t last_id = streams.back().id();
    batch[1].prompt.clear();
    EXPECT_THROW(engine.submit_all(batch), Error);
    RequestStream next = engine.submit(batch[0]);
    EXPECT_EQ(next.id(), last_id + 1);
    EXPECT_EQ(drain(next), alone[0]); // the engine goes on
    EXPECT_TRUE(engine.submit_all({}).empty());
}

} // namespace
} // namespace ninfer::test
