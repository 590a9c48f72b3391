// JSON constraint, token level: seeded random walks over the masks (tiny fixture tokenizer and
// the real Qwen3.5/3.6 one) until the end token; every finished output must parse and validate
// (independent validator), and the masks must equal the byte matcher's verdict on every token.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "json_test_schemas.h"
#include "json_test_util.h"
#include "ninfer/error.h"
#include "text/token_trie.h"

namespace {

using json_test::json;
using json_test::kOpen;
using json_test::kPerson;
using json_test::kTree;
using json_test::kUnion;
using ninfer::text::make_json_constraint;

void check_walks(const json& schema, const ninfer::text::Tokenizer& tok, int seeds, int exact_every,
                 int max_steps, const ninfer::text::JsonConstraintOptions& o = {}) {
    int ended = 0;
    for (int seed = 0; seed < seeds; ++seed) {
        const json_test::Walk w = json_test::random_walk(schema, tok, uint64_t(seed) * 7919 + 1,
                                                         exact_every, max_steps, o);
        if (::testing::Test::HasFailure()) return;
        if (!w.ended) continue;
        ++ended;
        json v;
        ASSERT_NO_THROW(v = json::parse(w.text)) << w.text;
        EXPECT_TRUE(json_test::valid(
            schema.is_null() ? json::parse(R"({"type": "object"})") : schema, v, schema))
            << w.text;
    }
    EXPECT_GE(ended, seeds * 3 / 4) << "most walks should reach the end token";
}

TEST(JsonConstraintWalk, TinyTokenizer) {
    const auto& tok = json_test::tiny();
    for (const char* s : {"null", "{}", kPerson, kTree, kUnion, kOpen}) {
        SCOPED_TRACE(s);
        check_walks(json::parse(s), tok, 25, 1, 600);
    }
}

TEST(JsonConstraintWalk, TinyTokenizerScalarsAndOptions) {
    const auto& tok = json_test::tiny();
    for (const char* s : {R"({"type": "string"})", R"({"type": "string", "minLength": 3,
         "maxLength": 4})",
                          R"({"type": "number"})", R"({"type": "number", "minimum": -2.5,
         "exclusiveMaximum": 7})",
                          R"({"type": "integer", "minimum": 10, "maximum": 12})",
                          R"({"enum": [1, 12, 123, "x", [1, {"a": null}]]})"}) {
        SCOPED_TRACE(s);
        check_walks(json::parse(s), tok, 20, 1, 300);
    }
    ninfer::text::JsonConstraintOptions pretty;
    pretty.allow_newlines = true;
    pretty.max_whitespace = 6;
    pretty.max_depth = 6;
    check_walks(json::parse("{}"), tok, 20, 1, 400, pretty);
}

TEST(JsonConstraintWalk, QwenTokenizer) {
    const auto* tok = &json_test::qwen();
    for (const char* s : {"null", kPerson, kTree, kUnion, kOpen}) {
        SCOPED_TRACE(s);
        check_walks(json::parse(s), *tok, 6, 0, 400); // masks checked exactly below
    }
    for (const char* s : {kPerson, kOpen}) {
        SCOPED_TRACE(s);
        (void)json_test::random_walk(json::parse(s), *tok, 5, 9, 40);
    }
}

// The mask at chosen states equals the byte matcher's verdict on every token (the trie walk's
// shortcuts: plain-string tables, length limits, skipped subtrees, several threads).
void check_exact_states(const ninfer::text::Tokenizer& tok) {
    const char* const kStr = R"({"type": "object", "properties": {"s": {"type": "string",
        "maxLength": 6}, "t": {"type": "string"}, "k": {"type": ["string", "integer"]},
        "u": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 4}]}}})";
    const std::vector<std::pair<const char*, std::string>> states = {
        {kStr, "{\"s\": \""},
        {kStr, "{\"s\": \"abcd"},
        {kStr, "{\"s\": \"ab\xE4\xBD"},
        {kStr, "{\"s\": \"a\\"},
        {kStr, "{\"s\": \"a\\u00"},
        {kStr, "{\"t\": \"\xF0\x9F"},
        {kStr, "{\"t\": \"x\\ud83d"},
        {kStr, "{\"k\": "},
        {kStr, "{\"u\": \"a"},
        {kStr, "{\"t\": \"x\", \"u\": \"abc"},
        {"{}", "{\"a\": 1, \""},
        {"{}", "{\"a\": 1, \"\xC3"},
        {"{}", "[\""},
        {"{}", "[1, 2.5"},
        {"{}", "{\"a\": [tr"},
        {kPerson, "{\"name\": \"Al"},
        {kPerson, "{\"tags\": [\"ab"},
        {kUnion, "[{\"kind\": \"rect\", "},
        {kOpen, "{\"b\": [1], \"x"},
        {kOpen, "{\"b\": [1], \"a\":"},
    };
    std::vector<uint8_t> mask;
    for (const auto& [schema, prefix] : states) {
        SCOPED_TRACE(std::string(schema) + " after " + prefix);
        ninfer::text::json::Matcher m(ninfer::text::json::Grammar::compile(json::parse(schema)));
        ASSERT_TRUE(m.advance(prefix));
        mask.assign(size_t(tok.vocab_size()), 0);
        m.fill_mask(*ninfer::text::TokenTrie::get(tok), mask.data(), mask.size());
        size_t wrong = 0, allowed = 0;
        for (int32_t id = 0; id < tok.vocab_size(); ++id) {
            const bool want = !tok.is_added(id) && m.accepts(tok.token_bytes(id));
            wrong += mask[size_t(id)] != want;
            allowed += want;
        }
        EXPECT_EQ(wrong, 0u) << allowed << " allowed";
    }
}

TEST(JsonConstraintWalk, ExactMasksAtStates) {
    check_exact_states(json_test::tiny());
    check_exact_states(json_test::qwen());
}

TEST(JsonConstraint, EndAndErrors) {
    const auto& tok = json_test::tiny();
    const int32_t end = tok.token_id("<|im_end|>").value();
    const int32_t other = tok.token_id("<|im_start|>").value();
    auto c = make_json_constraint(json::parse(R"({"type": "integer"})"), tok, {end});
    std::vector<uint8_t> mask(size_t(tok.vocab_size()) + 10, 0);
    c->allowed(mask);
    EXPECT_EQ(mask[size_t(end)], 0);
    EXPECT_EQ(mask[size_t(other)], 0);
    EXPECT_THROW(c->accept(end), ninfer::Error); // nothing written yet
    EXPECT_THROW(c->accept(other), ninfer::Error);
    const auto seven = tok.encode("7");
    ASSERT_EQ(seven.size(), 1u);
    c->accept(seven[0]);
    std::fill(mask.begin(), mask.end(), 0);
    c->allowed(mask);
    EXPECT_EQ(mask[size_t(end)], 1);
    EXPECT_EQ(mask[size_t(seven[0])], 1);
    EXPECT_THROW(c->accept(tok.encode("x")[0]), ninfer::Error);
    c->accept(end);
    std::fill(mask.begin(), mask.end(), 0);
    c->allowed(mask);
    EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), 1);
    EXPECT_THROW(c->accept(seven[0]), ninfer::Error);
}

TEST(JsonConstraint, SharedTrieAcrossThreads) {
    const auto& tok = json_test::tiny();
    std::vector<std::shared_ptr<const ninfer::text::TokenTrie>> tries(4);
    std::vector<std::vector<uint8_t>> masks(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < 4; ++i)
        threads.emplace_back([&, i] {
            tries[i] = ninfer::text::TokenTrie::get(tok);
            auto c = make_json_constraint(json::parse(kPerson), tok, {0});
            masks[i].assign(size_t(tok.vocab_size()), 0);
            c->allowed(masks[i]);
        });
    for (auto& t : threads) t.join();
    for (size_t i = 1; i < 4; ++i) {
        EXPECT_EQ(tries[i], tries[0]);
        EXPECT_EQ(masks[i], masks[0]);
    }
    EXPECT_EQ(ninfer::text::TokenTrie::get(tok)->order.size() + tok.added_tokens().size(),
              size_t(tok.vocab_size()));
}

} // namespace
