// MTP acceptance on the demo model, measured the way tools/train_demo/eval_mtp.py measures it in
// PyTorch (its prompts and figures in models/ninfer-demo/mtp_eval.json): each held-out window of
// P tokens is continued greedily for G tokens; at every position n of the continuation (n from
// P - 1 while n + K < P + G - 1) a request with the prompt x_0..x_n drafts K tokens from the true
// context in its first round, and all_first_k[k] is the share of positions whose first k + 1
// drafts were all accepted (ninfer's first-round accepted count). ninfer must match PyTorch's
// all_first_k within kAcceptanceTolerance.
#pragma once

#include <filesystem>
#include <fstream>

#include "model/speculative_exactness.h"

namespace ninfer::test {

// Acceptance is a share of ~2,000 positions; 0.02 is the bound (about 2 sigma of the
// sampling noise at p = 0.7, and far below a broken drafter's gap).
inline constexpr double kAcceptanceTolerance = 0.02;
// Requests in flight at once: the engine's verification groups (kVerifyGroups in engine.cpp).
inline constexpr size_t kMtpEvalBatch = 8;

struct MtpEval {
    std::string model_dir;
    int prompt_tokens = 0, continuation_tokens = 0, max_k = 0;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<double> all_first_k; // PyTorch's
};

inline std::string demo_model_dir() {
    return (std::filesystem::path(fixtures_dir()) / ".." / ".." / "models" / "ninfer-demo")
        .lexically_normal()
        .string();
}

inline MtpEval load_mtp_eval() {
    MtpEval e;
    e.model_dir = demo_model_dir();
    std::ifstream in(std::filesystem::path(e.model_dir) / "mtp_eval.json");
    if (!in) return e;
    const nlohmann::json j = nlohmann::json::parse(in);
    e.prompt_tokens = j.at("prompt_tokens").get<int>();
    e.continuation_tokens = j.at("continuation_tokens").get<int>();
    e.max_k = j.at("max_k").get<int>();
    e.prompts = j.at("prompts").get<std::vector<std::vector<int32_t>>>();
    e.all_first_k = j.at("pytorch").at("all_first_k").get<std::vector<double>>();
    return e;
}

// ninfer's all_first_k on the eval's windows.
inline std::vector<double> measure_all_first_k(EngineOptions options, const MtpEval& e) {
    options.model_dir = e.model_dir;
    const int P = e.prompt_tokens, G = e.continuation_tokens, K = e.max_k;
    Engine plain(options), spec(with_mtp(options, K));
    std::vector<GenerationRequest> continuations;
    for (const auto& p : e.prompts) continuations.push_back(greedy_request(p, G, 0));
    std::vector<RequestStream> streams = plain.submit_all(continuations);
    std::vector<std::vector<int32_t>> seqs = e.prompts;
    for (size_t w = 0; w < streams.size(); ++w) {
        RequestUpdate u;
        while (streams[w].next(u))
            for (const auto& t : u.tokens) seqs[w].push_back(t.id);
    }
    std::vector<int64_t> hits(size_t(K), 0);
    int64_t positions = 0;
    const int L = P + G - 1; // hidden positions h_0 .. h_{L-1}
    for (const auto& s : seqs) {
        EXPECT_EQ(int(s.size()), P + G);
        std::vector<GenerationRequest> all;
        for (int n = P - 1; n < L - K; ++n) // the first round drafts K tokens after x_{n+1}
            all.push_back(greedy_request(prefix_of(s, size_t(n) + 1), K + 2, 0));
        // At most the engine's verification groups at once, so every request drafts K tokens in
        // its first decode step (a later first round would start past position n).
        for (size_t i = 0; i < all.size(); i += kMtpEvalBatch) {
            const size_t end = std::min(all.size(), i + kMtpEvalBatch);
            std::vector<GenerationRequest> batch(all.begin() + int64_t(i),
                                                 all.begin() + int64_t(end));
            for (auto& r : spec.submit_all(batch)) {
                RequestUpdate u, last;
                while (r.next(u))
                    if (u.finished) last = u;
                const int a = last.timings.speculative.first_round_accepted;
                EXPECT_GE(a, 0) << "a request did not draft in its first decode step";
                for (int k = 0; k < K; ++k) hits[size_t(k)] += a > k;
                ++positions;
            }
        }
    }
    std::vector<double> share;
    for (int64_t h : hits) share.push_back(double(h) / double(std::max<int64_t>(positions, 1)));
    return share;
}

inline void check_mtp_acceptance(EngineOptions options) {
    const MtpEval e = load_mtp_eval();
    ASSERT_FALSE(e.prompts.empty()) << "no mtp_eval.json in " << e.model_dir;
    const std::vector<double> got = measure_all_first_k(options, e);
    ASSERT_EQ(got.size(), e.all_first_k.size());
    for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], e.all_first_k[k], kAcceptanceTolerance) << "position " << k + 1;
        std::printf("mtp acceptance all_first_k[%zu]: ninfer %.4f pytorch %.4f\n", k + 1, got[k],
                    e.all_first_k[k]);
    }
}

} // namespace ninfer::test
