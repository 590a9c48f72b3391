// Helpers of the JSON constraint tests: an independent validator for the supported JSON Schema
// subset (the oracle of the random walks), the tokenizers, and random walks over token masks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "text/json_constraint.h"
#include "text/json_matcher.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace json_test {

using ninfer::text::Tokenizer;
using nlohmann::json;

// JSON Schema validation of `v` by `s` (written from the spec, not from the compiler).
inline bool valid(const json& s, const json& v, const json& root, int depth = 0) {
    if (depth > 200) return false;
    if (s.is_boolean()) return s.get<bool>();
    if (s.value("nullable", false) && v.is_null()) return true;
    if (s.contains("$ref")) {
        const std::string ref = s["$ref"];
        return valid(root.at(json::json_pointer(ref.substr(1))), v, root, depth + 1);
    }
    if (s.contains("allOf"))
        for (const auto& sub : s["allOf"])
            if (!valid(sub, v, root, depth + 1)) return false;
    for (const char* k : {"anyOf", "oneOf"})
        if (s.contains(k)) {
            bool any = false;
            for (const auto& sub : s[k]) any = any || valid(sub, v, root, depth + 1);
            if (!any) return false;
        }
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
        return false;
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("type")) {
        const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
        bool ok = false;
        for (const auto& t : types) {
            const std::string n = t;
            ok =
                ok || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
                (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
                (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null()) ||
                (n == "integer" && v.is_number() && std::floor(v.get<double>()) == v.get<double>());
        }
        if (!ok) return false;
    }
    if (v.is_object()) {
        for (const auto& r : s.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            const json props = s.value("properties", json::object());
            const json& sub =
                props.contains(k) ? props[k] : s.value("additionalProperties", json(true));
            if (!valid(sub, x, root, depth + 1)) return false;
        }
    }
    if (v.is_array()) {
        if (v.size() < s.value("minItems", size_t(0)) || v.size() > s.value("maxItems", SIZE_MAX))
            return false;
        json prefix = s.value("prefixItems", json::array());
        json rest = s.value("items", json(true));
        if (rest.is_array()) prefix = rest, rest = s.value("additionalItems", json(true));
        for (size_t i = 0; i < v.size(); ++i)
            if (!valid(i < prefix.size() ? prefix[i] : rest, v[i], root, depth + 1)) return false;
    }
    if (v.is_string()) {
        size_t n = 0;
        for (char c : v.get<std::string>()) n += (uint8_t(c) & 0xC0) != 0x80;
        if (n < s.value("minLength", size_t(0)) || n > s.value("maxLength", SIZE_MAX)) return false;
    }
    if (v.is_number()) {
        const double x = v.get<double>();
        if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
        if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
        if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
            return false;
        if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
            return false;
    }
    return true;
}

inline const Tokenizer& tiny() {
    static const Tokenizer t =
        Tokenizer::from_model_dir(std::string(NINFER_TEXT_FIXTURES) + "/tiny_chat");
    return t;
}

// The real Qwen3.5/3.6 tokenizer: $NINFER_QWEN_TOKENIZER (a tokenizer.json), or the one
// tools/text/make_qwen_tokenizer.py writes into text_work/ (as check_tokenizer_oracle.py does)
// with the repository's venv, which the test command always sets up. Failing to get it is an
// error naming the cause (the tests that use it fail), never a silent skip.
inline const Tokenizer& qwen() {
    static const Tokenizer t = [] {
        namespace fs = std::filesystem;
        if (const char* env = std::getenv("NINFER_QWEN_TOKENIZER"))
            return Tokenizer::from_file(env);
        const fs::path root = fs::path(NINFER_TEXT_FIXTURES).parent_path().parent_path();
        const fs::path dir = fs::absolute("text_work/qwen3_6_tokenizer");
        if (!fs::exists(dir / "tokenizer_config.json")) {
            const fs::path python = root / "venv/bin/python";
            if (!fs::exists(python))
                throw std::runtime_error("no Qwen tokenizer: " + python.string() +
                                         " is missing (run tools/setup_python.sh, or set "
                                         "NINFER_QWEN_TOKENIZER to a tokenizer.json)");
            fs::create_directories(dir.parent_path());
            const fs::path tmp = fs::absolute("text_work/qwen_tok_" + std::to_string(::getpid()));
            const fs::path log = tmp.string() + ".log";
            const std::string cmd = python.string() + " " +
                                    (root / "tools/text/make_qwen_tokenizer.py").string() + " " +
                                    tmp.string() + " > " + log.string() + " 2>&1";
            if (std::system(cmd.c_str()) != 0)
                throw std::runtime_error("no Qwen tokenizer: `" + cmd + "` failed (see " +
                                         log.string() + ")");
            std::error_code ec;
            fs::rename(tmp, dir, ec); // another test process may have won the race
            if (ec) fs::remove_all(tmp, ec);
            fs::remove(log, ec);
            if (!fs::exists(dir / "tokenizer_config.json"))
                throw std::runtime_error("no Qwen tokenizer: " + dir.string() +
                                         " has no tokenizer_config.json after building it");
        }
        return Tokenizer::from_model_dir(dir);
    }();
    return t;
}

struct Walk {
    std::string text;
    bool ended = false;
    int steps = 0;
};

// Samples allowed tokens (seeded) until the end id or max_steps, checking that every sampled
// token is accepted and, on steps where exact_every divides the step, that the mask equals the
// byte matcher's verdict on every token.
inline Walk random_walk(const json& schema, const Tokenizer& tok, uint64_t seed,
                        int exact_every = 1, int max_steps = 800,
                        const ninfer::text::JsonConstraintOptions& options = {}) {
    const int32_t end = tok.token_id("<|im_end|>").value();
    auto c = ninfer::text::make_json_constraint(schema, tok, {end}, options);
    ninfer::text::json::Matcher oracle(ninfer::text::json::Grammar::compile(schema, options));
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> kinds(size_t(tok.vocab_size()), 3);
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
        if (id == end) kinds[size_t(id)] = 0;
        if (tok.is_added(id)) continue;
        const std::string& b = tok.token_bytes(id);
        kinds[size_t(id)] = b.find_first_not_of("\"]}") == std::string::npos ? 1 : 3;
    }
    std::vector<uint8_t> mask;
    Walk w;
    for (; w.steps < max_steps; ++w.steps) {
        mask.assign(size_t(tok.vocab_size()), 0);
        c->allowed(mask);
        if (exact_every > 0 && w.steps % exact_every == 0) {
            for (int32_t id = 0; id < tok.vocab_size(); ++id) {
                const bool want = id == end
                                      ? oracle.can_end()
                                      : !tok.is_added(id) && oracle.accepts(tok.token_bytes(id));
                if (mask[size_t(id)] != want) {
                    ADD_FAILURE() << "mask[" << id << "] = " << int(mask[size_t(id)]) << " for "
                                  << json(tok.decode(std::vector<int32_t>{id})).dump() << " after "
                                  << json(ninfer::text::utf8_lossy(w.text)).dump();
                    return w;
                }
            }
        }
        // Finishing bias: with probability p_close, a token from the first non-empty tier of
        // closers (the end token; tokens made of '"', ']' and '}').
        std::vector<int32_t> all, tier[2];
        for (int32_t id = 0; id < int32_t(mask.size()); ++id) {
            if (!mask[size_t(id)]) continue;
            all.push_back(id);
            if (kinds[size_t(id)] < 2) tier[kinds[size_t(id)]].push_back(id);
        }
        if (all.empty()) {
            ADD_FAILURE() << "empty mask after " << json(ninfer::text::utf8_lossy(w.text)).dump();
            return w;
        }
        const double p_close = w.steps < 8 ? 0.1 : w.steps < 100 ? 0.4 : 0.9;
        const std::vector<int32_t>* pool = &all;
        if (std::uniform_real_distribution<>(0, 1)(rng) < p_close)
            for (const auto& t : tier)
                if (!t.empty() && (&t != &tier[0] || rng() % 2 == 0)) {
                    pool = &t;
                    break;
                }
        const int32_t id = (*pool)[rng() % pool->size()];
        c->accept(id);
        if (id == end) {
            w.ended = true;
            EXPECT_TRUE(oracle.can_end());
            return w;
        }
        const std::string& bytes = tok.token_bytes(id);
        EXPECT_TRUE(oracle.advance(bytes));
        w.text += bytes;
    }
    return w;
}

} // namespace json_test
