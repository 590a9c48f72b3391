// Forced tool calls, token level: seeded random walks over the masks of the tool-call
// constraint (tiny fixture tokenizer) until the end token. Every finished output goes through
// the output parser as the server's does; the call must name an allowed tool and its arguments
// must validate against the tool's parameters (json_test::valid, independent of the grammar):
// required parameters present, enums respected, numbers as JSON numbers. Parallel on and off,
// the length bound (max_tokens) and the lead text are checked too.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "json_test_util.h"
#include "ninfer/error.h"
#include "text/output_parser.h"
#include "text/tool_call_constraint.h"

namespace {

using json_test::json;
using ninfer::text::make_tool_call_constraint;
using ninfer::text::OutputParser;
using ninfer::text::ParserOptions;
using ninfer::text::ToolCallConstraintOptions;
using ojson = nlohmann::ordered_json;

const char* const kTools = R"([
 {"type": "function", "function": {"name": "get_weather", "parameters": {
   "type": "object",
   "properties": {
     "city": {"type": "string", "minLength": 1, "maxLength": 20},
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
     "days": {"type": "integer", "minimum": 1, "maximum": 14},
     "detail": {"type": "boolean"}
   },
   "required": ["city", "unit"]}}},
 {"type": "function", "function": {"name": "add", "parameters": {
   "type": "object",
   "properties": {
     "a": {"type": "number"},
     "b": {"type": "number", "minimum": -5, "maximum": 5},
     "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3},
     "mode": {"$ref": "#/$defs/mode"},
     "opts": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
              "additionalProperties": false}
   },
   "required": ["a", "b", "mode"],
   "$defs": {"tag": {"type": "string", "maxLength": 6},
             "mode": {"enum": ["fast", 3, true]}}}}},
 {"type": "function", "function": {"name": "ping", "parameters": {"type": "object",
   "properties": {}}}}
])";

struct Walk {
    std::string text;
    bool ended = false;
    int tokens = 0;
};

// A random walk: each step a uniformly random allowed token (the end token with a small bias
// so that parallel walks end). The mask is checked against accept() on a sample of tokens.
Walk walk(const ojson& tools, const ToolCallConstraintOptions& o, uint64_t seed, int max_steps,
          const ninfer::text::Tokenizer& tok = json_test::tiny(), double* mask_ms = nullptr,
          double* total_ms = nullptr) {
    const int32_t end = tok.token_id("<|im_end|>").value();
    auto c = make_tool_call_constraint(tools, tok, {end}, o);
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> mask;
    std::vector<int32_t> ids;
    Walk w;
    for (; w.tokens < max_steps; ++w.tokens) {
        mask.assign(size_t(tok.vocab_size()), 0);
        const auto t0 = std::chrono::steady_clock::now();
        c->allowed(mask);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (mask_ms) *mask_ms = std::max(*mask_ms, ms);
        if (total_ms) *total_ms += ms;
        std::vector<int32_t> all;
        for (int32_t id = 0; id < int32_t(mask.size()); ++id)
            if (mask[size_t(id)]) all.push_back(id);
        if (all.empty()) {
            ADD_FAILURE() << "empty mask after " << json(ninfer::text::utf8_lossy(w.text)).dump();
            return w;
        }
        int32_t pick = all[rng() % all.size()];
        if (mask[size_t(end)] && rng() % 3 == 0) pick = end;
        c->accept(pick);
        if (pick == end) {
            w.ended = true;
            ++w.tokens;
            return w;
        }
        w.text += tok.token_bytes(pick);
    }
    return w;
}

const json& params_of(const ojson& tools, const std::string& name) {
    static std::map<std::string, json> cache;
    for (const auto& t : tools)
        if (t["function"]["name"] == name)
            return cache[name] = json::parse(t["function"]["parameters"].dump());
    static const json none;
    return none;
}

// Parses `text` as the server does and checks every call.
std::vector<ninfer::text::ToolCall> check_calls(const ojson& tools, const std::string& text,
                                                const std::vector<std::string>& allowed) {
    ParserOptions po;
    po.tools = tools;
    OutputParser p(po);
    p.push(text);
    p.finish();
    EXPECT_EQ(p.content(), "") << json(text).dump();
    for (const auto& call : p.tool_calls()) {
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), call.name), allowed.end()) << call.name;
        const json args = json::parse(call.arguments, nullptr, false);
        const json& schema = params_of(tools, call.name);
        EXPECT_TRUE(args.is_object() && json_test::valid(schema, args, schema))
            << call.name << " " << call.arguments << "\nfrom " << json(text).dump();
    }
    return p.tool_calls();
}

TEST(ToolCallConstraint, EveryWalkParsesIntoValidArguments) {
    const ojson tools = ojson::parse(kTools);
    int seen_optional = 0;
    for (uint64_t seed = 1; seed <= 60; ++seed) {
        ToolCallConstraintOptions o;
        o.parallel = false;
        o.max_tokens = 300;
        const Walk w = walk(tools, o, seed, 800);
        ASSERT_FALSE(::testing::Test::HasFailure());
        ASSERT_TRUE(w.ended) << "seed " << seed << ": " << json(w.text).dump();
        EXPECT_LE(w.tokens, o.max_tokens);
        const auto calls = check_calls(tools, w.text, {"get_weather", "add", "ping"});
        ASSERT_EQ(calls.size(), 1u) << json(w.text).dump();
        const json args = json::parse(calls[0].arguments);
        if (calls[0].name == "get_weather") {
            EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit");
            seen_optional += args.contains("days");
            if (args.contains("days")) {
                EXPECT_TRUE(args["days"].is_number_integer());
            }
        }
        if (calls[0].name == "add") {
            EXPECT_TRUE(args["a"].is_number());
            EXPECT_TRUE(args["b"].is_number());
            EXPECT_TRUE(args["mode"] == "fast" || args["mode"] == 3 || args["mode"] == true);
        }
        if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GT(seen_optional, 0); // optional parameters are written too
}

TEST(ToolCallConstraint, NamedToolAndLead) {
    ojson tools = ojson::array();
    for (const auto& t : ojson::parse(kTools))
        if (t["function"]["name"] == "add") tools.push_back(t);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        ToolCallConstraintOptions o;
        o.parallel = false;
        o.lead = "\n</think>\n\n";
        o.max_tokens = 200;
        const Walk w = walk(tools, o, seed, 800);
        ASSERT_TRUE(w.ended);
        ASSERT_EQ(w.text.rfind("\n</think>\n\n<tool_call>\n<function=add>\n", 0), 0u) << w.text;
        const auto calls = check_calls(ojson::parse(kTools), w.text.substr(o.lead.size()), {"add"});
        ASSERT_EQ(calls.size(), 1u);
    }
}

TEST(ToolCallConstraint, ParallelAllowsSeveralCalls) {
    const ojson tools = ojson::parse(kTools);
    size_t most = 0;
    for (uint64_t seed = 1; seed <= 30; ++seed) {
        ToolCallConstraintOptions o;
        o.parallel = true;
        o.max_tokens = 500;
        const Walk w = walk(tools, o, seed, 800);
        ASSERT_TRUE(w.ended);
        EXPECT_LE(w.tokens, o.max_tokens);
        const auto calls = check_calls(tools, w.text, {"get_weather", "add", "ping"});
        ASSERT_GE(calls.size(), 1u);
        most = std::max(most, calls.size());
    }
    EXPECT_GT(most, 1u);
}

TEST(ToolCallConstraint, OnlyDeclaredAndRequiredParameters) {
    const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"q": {"type": "string"},
      "n": {"type": "integer"}}, "required": ["q", "n"]}}}])");
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        ToolCallConstraintOptions o;
        o.parallel = false;
        o.max_tokens = 200;
        const Walk w = walk(tools, o, seed, 800);
        ASSERT_TRUE(w.ended);
        const auto calls = check_calls(tools, w.text, {"f"});
        ASSERT_EQ(calls.size(), 1u);
        const json args = json::parse(calls[0].arguments);
        EXPECT_EQ(args.size(), 2u) << calls[0].arguments;
        EXPECT_TRUE(args["q"].is_string() && args["n"].is_number_integer()) << calls[0].arguments;
    }
}

TEST(ToolCallConstraint, RawValuesAvoidTagsAndNull) {
    // The canonical text is accepted token by token; tags inside a raw value and a bare "null"
    // are not.
    const auto& tok = json_test::tiny();
    const int32_t end = tok.token_id("<|im_end|>").value();
    const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
      "required": ["q"]}}}])");
    auto feeds = [&](const std::string& text) {
        auto c = make_tool_call_constraint(tools, tok, {end}, {});
        for (int32_t id : tok.encode(text, false)) {
            std::vector<uint8_t> mask(size_t(tok.vocab_size()), 0);
            c->allowed(mask);
            if (!mask[size_t(id)]) return false;
            c->accept(id);
        }
        std::vector<uint8_t> mask(size_t(tok.vocab_size()), 0);
        c->allowed(mask);
        return bool(mask[size_t(end)]);
    };
    const std::string head = "<tool_call>\n<function=f>\n<parameter=q>\n";
    const std::string tail = "\n</parameter>\n</function>\n</tool_call>";
    EXPECT_TRUE(feeds(head + "hello\nworld" + tail));
    EXPECT_TRUE(feeds(head + "" + tail));
    EXPECT_FALSE(feeds(head + "a</function>b" + tail));
    EXPECT_FALSE(feeds(head + "a<parameter=x>b" + tail));
    EXPECT_FALSE(feeds(head + "NULL" + tail));
    EXPECT_FALSE(feeds(head + "hi" + "\n</parameter>\n</function>\n</tool_call>\n<tool_call>"));
    EXPECT_FALSE(feeds("<tool_call>\n<function=g>\n"));
}

TEST(ToolCallConstraint, RejectsUnwritableSchemas) {
    const auto& tok = json_test::tiny();
    const int32_t end = tok.token_id("<|im_end|>").value();
    EXPECT_THROW(make_tool_call_constraint(ojson::parse(R"([{"type": "function", "function":
      {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer",
      "multipleOf": 3}}}}}])"),
                                           tok, {end}, {}),
                 ninfer::Error);
    EXPECT_THROW(make_tool_call_constraint(ojson::parse(R"([{"type": "function", "function":
      {"name": "f", "parameters": {"type": "object", "properties": {}, "required": ["y"]}}}])"),
                                           tok, {end}, {}),
                 ninfer::Error);
}

// The real Qwen3.5/3.6 vocabulary (<tool_call> is an added token there): the walks validate
// too; prints the slowest mask (no timing assertion).
TEST(ToolCallConstraint, QwenVocabularyWalks) {
    const auto* tok = &json_test::qwen();
    const ojson tools = ojson::parse(kTools);
    double slowest = 0, total = 0;
    int masks = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        ToolCallConstraintOptions o;
        o.parallel = seed % 2 == 0;
        o.lead = "\n\n";
        o.max_tokens = 120;
        const Walk w = walk(tools, o, seed, 400, *tok, &slowest, &total);
        masks += w.tokens;
        ASSERT_FALSE(::testing::Test::HasFailure());
        ASSERT_TRUE(w.ended);
        EXPECT_LE(w.tokens, o.max_tokens);
        check_calls(tools, w.text.substr(2), {"get_weather", "add", "ping"});
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t end = tok->token_id("<|im_end|>").value();
    make_tool_call_constraint(tools, *tok, {end}, {});
    std::printf("[bench] Qwen vocabulary: constraint built in %.2f ms\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
    std::printf("[bench] Qwen vocabulary: tool-call masks %.2f ms on average, slowest %.2f ms\n",
                total / std::max(masks, 1), slowest);
}

} // namespace
