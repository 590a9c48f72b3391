// Exactness of the serving core, shared by the CPU (tests/model) and CUDA (tests/cuda) suites,
// in the style of SGLang's cold-versus-hit tests: a request gives the same greedy tokens and
// logprobs alone on a server without prefix cache (cold), served from the prefix cache (prompts
// ending 1, 2 and 15 tokens past a snapshot, the same prompt again, a follow-up chat turn),
// batched with others in any position, and preempted and recomputed; seeded sampling gives the
// same tokens cold and hot. Logprobs may differ only as two schedules of one engine do (the
// prefill is cut at other points, other row counts pick other kernels): the Comparison says by
// how much, and over how many steps (bf16 runs of random tiny models fork at near-ties).
#pragma once

#include <cmath>
#include <limits>
#include <cstdio>
#include <string>

#include "model/fixture_util.h"

namespace ninfer::test {

// How two runs are compared: the first `steps` generated tokens (0: all) must be the same ids,
// with logprobs within logprob_tol (negative: ids only). With near_tie > 0, a step may choose
// another id only where the two are tied within near_tie in `want`'s own distribution: got's id
// is among want's top alternatives with a logprob at most near_tie below want's choice. Such a
// fork ends the comparison (later tokens continue other texts).
struct Comparison {
    double logprob_tol = 0;
    size_t steps = 0;
    double near_tie = 0;
};
inline constexpr Comparison kIdsOnly{-1, 0};

// Whether `got` may stand where `want` was chosen: the same id, or (near_tie > 0) an id that
// want's distribution ranks within near_tie of its choice. Explains a refusal in *why.
inline bool same_or_near_tie(const GeneratedToken& got, const GeneratedToken& want,
                             double near_tie, std::string* why) {
    if (got.id == want.id) return true;
    for (const auto& alt : want.top_logprobs)
        if (alt.id == got.id) {
            const double gap = want.logprob - alt.logprob;
            if (near_tie > 0 && gap <= near_tie) return true;
            *why = "id " + std::to_string(got.id) + " instead of " + std::to_string(want.id) +
                   ", which led it by " + std::to_string(gap) + " nats (near_tie " +
                   std::to_string(near_tie) + ")";
            return false;
        }
    *why = "id " + std::to_string(got.id) + " instead of " + std::to_string(want.id) +
           ", not among the " + std::to_string(want.top_logprobs.size()) + " alternatives";
    return false;
}

struct Generated {
    std::vector<GeneratedToken> tokens;
    RequestTimings timings;
};

inline Generated run_one(Engine& engine, const GenerationRequest& r) {
    RequestUpdate last;
    Generated g;
    g.tokens = generate(engine, r, &last);
    g.timings = last.timings;
    return g;
}

inline void expect_same_output(std::vector<GeneratedToken> got, std::vector<GeneratedToken> want,
                               Comparison cmp, const std::string& what) {
    const double logprob_tol = cmp.logprob_tol;
    if (cmp.steps > 0) {
        ASSERT_GE(got.size(), cmp.steps) << what;
        ASSERT_GE(want.size(), cmp.steps) << what;
        got.resize(cmp.steps);
        want.resize(cmp.steps);
    }
    if (cmp.near_tie > 0) {
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) {
            std::string why;
            ASSERT_TRUE(same_or_near_tie(got[i], want[i], cmp.near_tie, &why))
                << what << " step " << i << ": " << why;
            if (got[i].id != want[i].id) { // a near-tie fork: the texts part here
                std::printf("%s: near-tie fork at step %zu: id %d for %d\n", what.c_str(), i,
                            got[i].id, want[i].id);
                got.resize(i);
                want.resize(i);
                break;
            }
        }
    }
    ASSERT_EQ(ids_of(got), ids_of(want)) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i].logprob)) << what << " step " << i;
        if (logprob_tol < 0) continue;
        EXPECT_NEAR(got[i].logprob, want[i].logprob, logprob_tol) << what << " step " << i;
        ASSERT_EQ(got[i].top_logprobs.size(), want[i].top_logprobs.size()) << what;
        for (size_t k = 0; k < got[i].top_logprobs.size(); ++k)
            EXPECT_NEAR(got[i].top_logprobs[k].logprob, want[i].top_logprobs[k].logprob,
                        logprob_tol)
                << what << " step " << i << " alternative " << k;
    }
}

inline std::vector<int32_t> prefix_of(const std::vector<int32_t>& t, size_t n) {
    return std::vector<int32_t>(t.begin(), t.begin() + int64_t(std::min(n, t.size())));
}

// The long prompt of a fixture, extended with its own tokens to at least n.
inline std::vector<int32_t> long_prompt(const Fixture& f, size_t n) {
    std::vector<int32_t> p = f.cases.back().prompt;
    for (size_t i = 0; p.size() < n; ++i) p.push_back(p[i]);
    return p;
}

// options: the device and dtype; the prefix cache and snapshot stride are set here.
inline void check_prefix_cache_exactness(EngineOptions options, const Fixture& f,
                                         Comparison logprob_tol) {
    options.model_dir = f.dir;
    options.kv_block_size = 16;
    options.snapshot_stride = 32;
    options.prefill_chunk = 48;
    EngineOptions cold_options = options;
    cold_options.prefix_cache = false;
    Engine cold(cold_options), hot(options);
    const std::vector<int32_t> base = long_prompt(f, 200);
    // Warm the cache with a 64-token prompt (snapshots at 32 and 63).
    run_one(hot, greedy_request(prefix_of(base, 64), 4));
    for (size_t past : {1, 2, 15}) {
        const auto prompt = prefix_of(base, 64 + past);
        const Generated want = run_one(cold, greedy_request(prompt, 8));
        const Generated got = run_one(hot, greedy_request(prompt, 8));
        EXPECT_GT(got.timings.cached_tokens, 0) << f.name << " +" << past;
        EXPECT_EQ(want.timings.cached_tokens, 0);
        expect_same_output(got.tokens, want.tokens, logprob_tol,
                           f.name + " prompt 64+" + std::to_string(past));
        // The same prompt again: served from its own prompt snapshot (all but the last token).
        const Generated again = run_one(hot, greedy_request(prompt, 8));
        EXPECT_EQ(again.timings.cached_tokens, int(prompt.size()) - 1) << f.name;
        expect_same_output(again.tokens, want.tokens, logprob_tol, f.name + " again");
    }
    // A chat turn: turn 2 = turn 1 + its answer + new tokens resumes from turn 1's end.
    const auto turn1 = prefix_of(base, 37);
    const Generated answer = run_one(hot, greedy_request(turn1, 6));
    std::vector<int32_t> turn2 = turn1;
    for (const auto& t : answer.tokens) turn2.push_back(t.id);
    for (size_t i = 0; i < 5; ++i) turn2.push_back(base[100 + i]);
    const Generated want2 = run_one(cold, greedy_request(turn2, 8));
    const Generated got2 = run_one(hot, greedy_request(turn2, 8));
    EXPECT_EQ(got2.timings.cached_tokens, int(turn1.size() + answer.tokens.size()) - 1) << f.name;
    expect_same_output(got2.tokens, want2.tokens, logprob_tol, f.name + " turn 2");
    // Seeded sampling: the same tokens cold and hot.
    GenerationRequest sampled = greedy_request(turn2, 8);
    sampled.sampling.greedy = false;
    sampled.sampling.temperature = 0.8f;
    sampled.sampling.top_k = 20;
    sampled.sampling.seed = 1234;
    expect_same_output(run_one(hot, sampled).tokens, run_one(cold, sampled).tokens,
                       {-1, logprob_tol.steps}, f.name + " seeded sampling");
}

// One device snapshot row and a host tier: a second conversation pushes the first one's snapshot
// to host memory, and the first conversation's next turn is restored from there.
inline void check_host_tier(EngineOptions options, const Fixture& f, Comparison cmp) {
    options.model_dir = f.dir;
    options.prefix_cache_snapshots = 1;
    options.prefix_cache_host_gb = 0.25;
    options.snapshot_stride = 4096; // no stride snapshots: only prompt and turn ends
    EngineOptions cold_options = options;
    cold_options.prefix_cache = false;
    Engine cold(cold_options), hot(options);
    const std::vector<int32_t> base = long_prompt(f, 200);
    const auto first = prefix_of(base, 50);
    const Generated answer = run_one(hot, greedy_request(first, 5));
    std::vector<int32_t> other(base.begin() + 100, base.begin() + 140);
    run_one(hot, greedy_request(other, 5)); // takes the device row: the first goes to the host
    EXPECT_GT(hot.stats().snapshots_host, 0) << f.name;
    std::vector<int32_t> turn2 = first;
    for (const auto& t : answer.tokens) turn2.push_back(t.id);
    turn2.push_back(base[60]);
    const Generated want = run_one(cold, greedy_request(turn2, 8));
    const Generated got = run_one(hot, greedy_request(turn2, 8));
    EXPECT_EQ(got.timings.cached_tokens, int(first.size() + answer.tokens.size()) - 1) << f.name;
    expect_same_output(got.tokens, want.tokens, cmp, f.name + " from the host tier");
}

// Several requests at once, in every order, equal their solo runs; then again on a pool so small
// that requests are preempted and recomputed.
inline void check_batching_and_preemption(EngineOptions options, const Fixture& f,
                                          Comparison logprob_tol) {
    options.model_dir = f.dir;
    options.kv_block_size = 16;
    options.prefill_chunk = 32;
    options.max_batch_tokens = 64;
    const std::vector<int32_t> base = long_prompt(f, 200);
    std::vector<std::vector<int32_t>> prompts = {prefix_of(base, 40), f.cases.front().prompt,
                                                 prefix_of(base, 71), prefix_of(base, 17)};
    EngineOptions solo_options = options;
    solo_options.prefix_cache = false;
    Engine solo(solo_options);
    std::vector<Generated> want;
    for (const auto& p : prompts) want.push_back(run_one(solo, greedy_request(p, 40)));
    for (int pass = 0; pass < 2; ++pass) {
        EngineOptions o = options;
        if (pass == 1) { // 12 blocks: four requests growing to ~100 tokens do not fit at once
            o.max_context = 160;
            o.kv_cache_tokens = 12 * 16;
        }
        Engine engine(o);
        for (int rotation = 0; rotation < 2; ++rotation) {
            std::vector<GenerationRequest> requests;
            for (size_t i = 0; i < prompts.size(); ++i)
                requests.push_back(greedy_request(prompts[(i + rotation) % prompts.size()], 40));
            std::vector<RequestStream> streams = engine.submit_all(requests);
            int preemptions = 0;
            for (size_t i = 0; i < streams.size(); ++i) {
                std::vector<GeneratedToken> got;
                RequestUpdate u;
                while (streams[i].next(u)) {
                    got.insert(got.end(), u.tokens.begin(), u.tokens.end());
                    if (u.finished) preemptions += u.timings.preemptions;
                }
                const size_t which = (i + rotation) % prompts.size();
                expect_same_output(got, want[which].tokens, logprob_tol,
                                   f.name + (pass ? " preempted" : " batched") + " request " +
                                       std::to_string(which) + " at " + std::to_string(i));
            }
            if (pass == 1) {
                EXPECT_GT(preemptions, 0) << f.name << ": nothing was preempted";
            }
        }
    }
}

// A request's cache_boundary keeps a snapshot there: a later prompt that shares only the first
// `boundary` tokens (a chat turn whose answer is re-rendered) resumes exactly from it, with the
// cold run's output; without the boundary nothing that short is cached.
inline void check_cache_boundary(EngineOptions options, const Fixture& f, Comparison cmp) {
    options.model_dir = f.dir;
    options.snapshot_stride = 4096; // no stride snapshots
    EngineOptions cold_options = options;
    cold_options.prefix_cache = false;
    Engine cold(cold_options), hot(options), plain(options);
    const std::vector<int32_t> base = long_prompt(f, 200);
    const size_t boundary = 37;
    GenerationRequest first = greedy_request(prefix_of(base, 60), 4);
    first.cache_boundary = int(boundary);
    run_one(hot, first);
    run_one(plain, greedy_request(prefix_of(base, 60), 4)); // the same turn, no boundary
    std::vector<int32_t> next = prefix_of(base, boundary);
    for (size_t i = 0; i < 20; ++i) next.push_back(base[150 + i]); // diverges right after it
    const Generated want = run_one(cold, greedy_request(next, 8));
    const Generated got = run_one(hot, greedy_request(next, 8));
    EXPECT_EQ(got.timings.cached_tokens, int(boundary)) << f.name;
    expect_same_output(got.tokens, want.tokens, cmp, f.name + " from the cache boundary");
    EXPECT_EQ(run_one(plain, greedy_request(next, 8)).timings.cached_tokens, 0) << f.name;
}

// A prefill_only request (the server's next-turn warming) runs its prompt into the cache and
// ends with Length without a token: a later prompt that extends it resumes from its end, with
// the cold run's output; it stays out of the prefix-cache statistics (counted as warm tokens),
// and asking it for tokens is refused.
inline void check_prefill_only(EngineOptions options, const Fixture& f, Comparison cmp) {
    options.model_dir = f.dir;
    options.snapshot_stride = 4096; // no stride snapshots: what is cached is the warm's doing
    EngineOptions cold_options = options;
    cold_options.prefix_cache = false;
    Engine cold(cold_options), hot(options);
    const std::vector<int32_t> base = long_prompt(f, 200);
    GenerationRequest warm = greedy_request(prefix_of(base, 90), 0);
    warm.prefill_only = true;
    warm.priority = std::numeric_limits<int>::max();
    const Generated warmed = run_one(hot, warm);
    EXPECT_TRUE(warmed.tokens.empty()) << f.name;
    const EngineStats after_warm = hot.stats();
    EXPECT_EQ(after_warm.prefix_query_tokens, 0) << f.name;
    EXPECT_EQ(after_warm.prefill_only_tokens, 90) << f.name;
    const std::vector<int32_t> next = prefix_of(base, 120);
    const Generated want = run_one(cold, greedy_request(next, 8));
    const Generated got = run_one(hot, greedy_request(next, 8));
    EXPECT_EQ(got.timings.cached_tokens, 90) << f.name;
    expect_same_output(got.tokens, want.tokens, cmp, f.name + " after a prefill_only warm");
    GenerationRequest bad = warm;
    bad.max_new_tokens = 4;
    EXPECT_THROW(hot.submit(bad), Error) << f.name;
}

} // namespace ninfer::test
