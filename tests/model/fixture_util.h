// Helpers for the model tests: the committed HF fixtures and their reference outputs.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ninfer/engine.h"

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
    // HF's own bf16 logits deviation from its f64 run on the long prompt (max |diff| / max |logit|).
    double hf_bf16_logits_rel = 0;
};

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
            for (const auto& s : c["steps"]) {
                ReferenceStep st;
                st.id = s["id"].get<int32_t>();
                st.logprob = s["logprob"].get<double>();
                for (const auto& t : s["top"])
                    st.top.emplace_back(t[0].get<int32_t>(), t[1].get<double>());
                rc.steps.push_back(std::move(st));
            }
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

inline std::vector<int32_t> ids_of(const std::vector<GeneratedToken>& tokens) {
    std::vector<int32_t> ids;
    for (const auto& t : tokens) ids.push_back(t.id);
    return ids;
}

} // namespace ninfer::test
