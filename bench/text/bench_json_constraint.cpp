// The cost of one JSON-constraint token mask on a real vocabulary, at chosen matcher states
// (was a timed gtest; timings belong in bench/). One JSON line per state on stdout.
//   bench_json_constraint TOKENIZER   (a tokenizer.json, or a model directory holding one;
//                                      tools/text/make_qwen_tokenizer.py writes the Qwen one)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_test_schemas.h"
#include "ninfer/error.h"
#include "text/json_matcher.h"
#include "text/token_trie.h"
#include "text/tokenizer.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using ninfer::text::Tokenizer;

struct State {
    const char* name;
    const char* schema;
    const char* prefix;
};

const State kStates[] = {
    {"object start (closed keys)", json_test::kPerson, "{"},
    {"declared key", json_test::kPerson, "{\"na"},
    {"string value, maxLength 12", json_test::kPerson, "{\"name\": \"Al"},
    {"integer value", json_test::kPerson, "{\"name\": \"Al\", \"age\": "},
    {"enum value", json_test::kPerson, "{\"role\": \""},
    {"after a value", json_test::kPerson, "{\"name\": \"Al\""},
    {"any: value start", "{}", "{\"a\": "},
    {"any: free key", "{}", "{\"a\": 1, \""},
    {"any: free string", "{}", "{\"a\": \"The quick brown"},
    {"any: number", "{}", "[1, 2.5"},
    {"anyOf: 4 branches", json_test::kUnion, "["},
    {"anyOf: inside a branch", json_test::kUnion, "[{\"kind\": \"rect\", \"w\": 3, "},
    {"done: end only", "{}", "{\"a\": [1, 2]}"},
};

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int run(const std::string& path) {
    const Tokenizer tok = std::filesystem::is_directory(path) ? Tokenizer::from_model_dir(path)
                                                              : Tokenizer::from_file(path);
    auto t0 = Clock::now();
    const auto trie = ninfer::text::TokenTrie::build(tok);
    std::printf("%s\n", json{{"op", "token_trie_build"},
                             {"vocab", tok.vocab_size()},
                             {"nodes", trie->nodes.size()},
                             {"ms", ms_since(t0)}}
                            .dump()
                            .c_str());
    std::vector<uint8_t> mask(size_t(tok.vocab_size()));
    for (const State& s : kStates) {
        ninfer::text::json::Matcher m(ninfer::text::json::Grammar::compile(json::parse(s.schema)));
        if (!m.advance(std::string(s.prefix))) {
            std::fprintf(stderr, "bench_json_constraint: the matcher refused '%s'\n", s.prefix);
            return 1;
        }
        // The best of 5 rounds of 20 masks (the machine may be shared).
        double best_us = 1e30;
        for (int round = 0; round < 5; ++round) {
            t0 = Clock::now();
            for (int r = 0; r < 20; ++r) {
                std::fill(mask.begin(), mask.end(), 0);
                m.fill_mask(*trie, mask.data(), mask.size());
            }
            best_us = std::min(best_us, ms_since(t0) * 1000 / 20);
        }
        std::printf("%s\n", json{{"op", "json_mask"},
                                 {"state", s.name},
                                 {"us_per_mask", best_us},
                                 {"allowed", std::count(mask.begin(), mask.end(), 1)}}
                                .dump()
                                .c_str());
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: bench_json_constraint TOKENIZER (tokenizer.json or a model "
                             "directory; tools/text/make_qwen_tokenizer.py OUT writes Qwen's)\n");
        return 2;
    }
    try {
        return run(argv[1]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_json_constraint: %s\n", e.what());
        return 1;
    }
}
