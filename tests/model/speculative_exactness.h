// Exactness of speculative decoding with the MTP head, shared by the CPU (tests/model) and CUDA
// (tests/cuda) suites. Greedy output with MTP equals the output without it, for every K and
// auto: alone, batched (every request at once, drafting side by side), served from the prefix
// cache (the MTP KV is part of the cached blocks), and for requests that stop inside a drafted
// block (a stop id, max tokens). Each check also asserts that drafting really happened.
#pragma once

#include "model/serving_exactness.h"

namespace ninfer::test {

// The fixtures that carry mtp.* weights.
inline std::vector<Fixture> mtp_fixtures() {
    std::vector<Fixture> out;
    for (Fixture& f : load_fixtures())
        if (f.name.find("mtp") != std::string::npos || f.name.find("moe_vlm") != std::string::npos)
            out.push_back(std::move(f));
    return out;
}

inline EngineOptions with_mtp(EngineOptions o, int draft_tokens) {
    o.speculative = "mtp";
    o.draft_tokens = draft_tokens;
    return o;
}

// Which drafter a check runs: the MTP head, or a DFlash drafter from draft_model.
struct Speculation {
    std::string method = "mtp";
    std::string draft_model;
    std::string draft_shortlist; // the DFlash proposal head (EngineOptions::draft_shortlist)
    std::vector<int> alone_ks = {1, 2, 3, 4, 5, 6, 7, 8, 0}; // K values of the solo check
    int stop_k = 4; // K of the stop check
};

inline EngineOptions with_spec(EngineOptions o, const Speculation& s, int draft_tokens) {
    o.speculative = s.method;
    o.draft_model = s.draft_model;
    o.draft_shortlist = s.draft_shortlist;
    o.draft_tokens = draft_tokens;
    return o;
}

inline // Three requests of the prompt's first 17, 40 and 71 tokens at once (24 tokens each): `got`'s ids
// equal `want`'s.
void expect_same_batched(Engine& want, Engine& got, const std::vector<int32_t>& prompt,
                         const std::string& label) {
    std::vector<GenerationRequest> batch;
    for (size_t n : {17u, 40u, 71u}) batch.push_back(greedy_request(prefix_of(prompt, n), 24));
    std::vector<RequestStream> a = want.submit_all(batch), b = got.submit_all(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
        std::vector<GeneratedToken> w, g;
        RequestUpdate u;
        while (a[i].next(u)) w.insert(w.end(), u.tokens.begin(), u.tokens.end());
        while (b[i].next(u)) g.insert(g.end(), u.tokens.begin(), u.tokens.end());
        expect_same_output(g, w, kIdsOnly, label + " batched " + std::to_string(i));
    }
}

// Start-up capture (EngineOptions::graph_warmup): an engine of `options` and one that captures on
// first use (graph_warmup 0) give the same ids, one request of base's first 60 tokens alone and
// three at once (expect_same_batched); the first runs no eager warm-up or capture after start-up,
// and the second's warm-ups are counted (the gate's other arm). Returns the first's stats.
inline EngineStats expect_start_up_capture(const EngineOptions& options,
                                           const std::vector<int32_t>& base,
                                           const std::string& label) {
    EngineOptions cold_options = options;
    cold_options.graph_warmup = 0;
    Engine warm(options), cold(cold_options);
    expect_same_output(run_one(warm, greedy_request(prefix_of(base, 60), 40)).tokens,
                       run_one(cold, greedy_request(prefix_of(base, 60), 40)).tokens, kIdsOnly,
                       label + " alone");
    expect_same_batched(cold, warm, base, label);
    EXPECT_GT(warm.stats().graph_replays, 0) << label;
    EXPECT_EQ(warm.stats().graph_warmups, 0) << label;
    EXPECT_GT(cold.stats().graph_warmups, 0) << label;
    return warm.stats();
}

inline std::string k_name(int k) {
    return k == 0 ? std::string("auto") : "K=" + std::to_string(k);
}

// Alone: the same tokens (and logprobs within cmp) for K = 1..8 and auto.
inline void check_mtp_greedy_alone(EngineOptions options, const Fixture& f, Comparison cmp,
                                   const Speculation& sp = {}) {
    options.model_dir = f.dir;
    Engine plain(options);
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    const Generated want = run_one(plain, greedy_request(prompt, 32));
    for (int k : sp.alone_ks) {
        Engine spec(with_spec(options, sp, k));
        const Generated got = run_one(spec, greedy_request(prompt, 32));
        expect_same_output(got.tokens, want.tokens, cmp, f.name + " " + sp.method + " " + k_name(k));
        EXPECT_GT(got.timings.speculative.rounds, 0) << f.name << " " << k_name(k);
        if (k > 0) {
            EXPECT_LE(got.timings.speculative.drafted, got.timings.speculative.rounds * k);
        }
    }
}

// Batched and from the prefix cache: four requests at once on one MTP engine, then a follow-up
// turn that extends one of them (a cache hit), against solo runs without MTP.
inline void check_mtp_batched_and_cached(EngineOptions options, const Fixture& f, int k,
                                         Comparison cmp, const Speculation& sp = {}) {
    options.model_dir = f.dir;
    options.kv_block_size = 16;
    options.snapshot_stride = 32;
    EngineOptions plain_options = options;
    plain_options.prefix_cache = false;
    Engine plain(plain_options), spec(with_spec(options, sp, k));
    const std::vector<int32_t> base = long_prompt(f, 200);
    const std::vector<std::vector<int32_t>> prompts = {prefix_of(base, 40), f.cases.front().prompt,
                                                       prefix_of(base, 71), prefix_of(base, 17)};
    std::vector<GenerationRequest> requests;
    for (const auto& p : prompts) requests.push_back(greedy_request(p, 24));
    std::vector<RequestStream> streams = spec.submit_all(requests);
    std::vector<std::vector<GeneratedToken>> answers;
    for (size_t i = 0; i < streams.size(); ++i) {
        std::vector<GeneratedToken> got;
        RequestUpdate u;
        int64_t rounds = 0;
        while (streams[i].next(u)) {
            got.insert(got.end(), u.tokens.begin(), u.tokens.end());
            if (u.finished) rounds = u.timings.speculative.rounds;
        }
        if (k > 0) { // auto may settle on plain decoding (random weights accept nothing)
            EXPECT_GT(rounds, 0) << f.name << " request " << i << " never drafted";
        }
        expect_same_output(got, run_one(plain, requests[i]).tokens, cmp,
                           f.name + " batched request " + std::to_string(i) + " " + k_name(k));
        answers.push_back(got);
    }
    // Turn 2 of request 0: its prompt, its answer and a few new tokens.
    std::vector<int32_t> turn2 = prompts[0];
    for (const auto& t : answers[0]) turn2.push_back(t.id);
    for (size_t i = 0; i < 5; ++i) turn2.push_back(base[120 + i]);
    const Generated hot = run_one(spec, greedy_request(turn2, 24));
    EXPECT_GT(hot.timings.cached_tokens, 0) << f.name;
    if (k > 0) {
        EXPECT_GT(hot.timings.speculative.rounds, 0) << f.name;
    }
    expect_same_output(hot.tokens, run_one(plain, greedy_request(turn2, 24)).tokens, cmp,
                       f.name + " turn 2 from the prefix cache " + k_name(k));
}

// Requests that end inside a drafted block: max_new_tokens 1..6, and a stop id at each of the
// first generated positions, end exactly where the plain run does, with its finish reason.
inline void check_mtp_stops_inside_blocks(EngineOptions options, const Fixture& f,
                                          const Speculation& sp = {}) {
    options.model_dir = f.dir;
    Engine plain(options), spec(with_spec(options, sp, sp.stop_k));
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 50), 50);
    const Generated full = run_one(plain, greedy_request(prompt, 12));
    ASSERT_EQ(full.tokens.size(), 12u);
    for (int n = 1; n <= 6; ++n) {
        RequestUpdate last;
        const auto got = generate(spec, greedy_request(prompt, n, 0), &last);
        EXPECT_EQ(last.reason, FinishReason::Length) << f.name << " max " << n;
        std::vector<GeneratedToken> want(full.tokens.begin(), full.tokens.begin() + n);
        expect_same_output(got, want, kIdsOnly, f.name + " max_new_tokens " + std::to_string(n));
    }
    for (size_t at = 1; at < 8; ++at) {
        const int32_t stop = full.tokens[at].id;
        size_t first = 0; // the plain run stops at the first occurrence
        while (full.tokens[first].id != stop) ++first;
        GenerationRequest r = greedy_request(prompt, 12, 0);
        r.stop_token_ids = {stop};
        RequestUpdate last;
        const auto got = generate(spec, r, &last);
        EXPECT_EQ(last.reason, FinishReason::Stop) << f.name << " stop at " << at;
        std::vector<GeneratedToken> want(full.tokens.begin(), full.tokens.begin() + first + 1);
        expect_same_output(got, want, kIdsOnly, f.name + " stop id " + std::to_string(stop));
    }
}

} // namespace ninfer::test
