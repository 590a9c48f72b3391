// The server's schema translation without HTTP: OpenAI and Anthropic request parsing
// (validation, messages into template input, tools, tool_choice, thinking), error shapes, the
// stream event builders, the forced-text constraint, the Prometheus rendering and `priority`.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/constraints.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/prepare.h"
#include "text/tool_call_constraint.h"

namespace ninfer::server {
namespace {

Json body(const char* text) {
    return parse_body(text);
}

int status_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const ApiError& e) {
        return e.status();
    }
    return 200;
}

TEST(OpenAIParse, MessagesToolsAndOptions) {
    const ChatJob job = parse_openai_chat(body(R"({
        "messages": [{"role": "developer", "content": [{"type": "text", "text": "Be "},
                                                        {"type": "text", "text": "brief."}]},
                     {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": null, "reasoning_content": "hmm",
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "temperature": 0, "top_k": -1, "seed": -3, "n": 2, "stop": "END",
        "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 2,
        "stream": true, "stream_options": {"include_usage": true},
        "chat_template_kwargs": {"enable_thinking": false}})"));
    EXPECT_EQ(job.messages[0]["role"], "system");
    EXPECT_EQ(job.messages[0]["content"], "Be brief.");
    EXPECT_EQ(job.messages[2]["content"], "");
    EXPECT_EQ(job.messages[2]["reasoning_content"], "hmm");
    EXPECT_EQ(job.messages[2]["tool_calls"][0]["function"]["arguments"]["a"], 1);
    EXPECT_EQ(job.messages[3]["tool_call_id"], "c1");
    EXPECT_EQ(job.tool_choice.kind, ToolChoice::Kind::Named);
    EXPECT_EQ(job.tool_choice.name, "f");
    EXPECT_EQ(*job.gen.sampling.temperature, 0.0);
    EXPECT_EQ(*job.gen.sampling.top_k, 0);
    EXPECT_EQ(*job.gen.sampling.seed, uint64_t(int64_t(-3)));
    EXPECT_EQ(job.gen.n, 2);
    EXPECT_EQ(job.gen.stop, std::vector<std::string>{"END"});
    EXPECT_EQ(*job.gen.max_tokens, 7);
    EXPECT_TRUE(job.gen.logprobs);
    EXPECT_EQ(job.gen.top_logprobs, 2);
    EXPECT_TRUE(job.gen.include_usage);
    EXPECT_EQ(job.template_vars["enable_thinking"], false);
}

TEST(OpenAIParse, RejectsBadAndUnsupportedFields) {
    const char* bad[] = {
        R"({"messages": []})",
        R"({"messages": [{"role": "user"}], "temperature": 2.5})",
        R"({"messages": [{"role": "user"}], "top_p": 0})",
        R"({"messages": [{"role": "user"}], "n": 17})",
        R"({"messages": [{"role": "user"}], "n": 1.5})",
        R"({"messages": [{"role": "user"}], "max_tokens": 0})",
        R"({"messages": [{"role": "user"}], "top_logprobs": 2})",
        R"({"messages": [{"role": "user"}], "stream_options": {"include_usage": true}})",
        R"({"messages": [{"role": "user"}], "audio": {"voice": "x"}})",
        R"({"messages": [{"role": "user"}], "functions": [{"name": "f"}]})",
        R"({"messages": [{"role": "user"}], "logit_bias": [1, 2]})",
        R"({"messages": [{"role": "user"}], "logit_bias": {"x": 2}})",
        R"({"messages": [{"role": "user"}], "logit_bias": {"-1": 2}})",
        R"({"messages": [{"role": "user"}], "logit_bias": {"99999999999": 2}})",
        R"({"messages": [{"role": "user"}], "logit_bias": {"1": 101}})",
        R"({"messages": [{"role": "user"}], "logit_bias": {"1": "2"}})",
        R"({"messages": [{"role": "user"}], "modalities": ["audio"]})",
        R"({"messages": [{"role": "user"}], "tool_choice": "required"})",
        R"({"messages": [{"role": "user"}], "tools": [{"type": "function", "function": {"name": "a"}}],
            "tool_choice": {"type": "function", "function": {"name": "b"}}})",
        R"({"messages": [{"role": "user"}], "tools": [{"type": "code_interpreter"}]})",
        R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
        R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
            "arguments": "not json"}}]}]})",
        R"({"messages": [{"role": "user"}], "response_format": {"type": "xml"}})",
        R"({"messages": [{"role": "user"}], "stop": [1]})",
        // A fuzz finding: a tool_choice whose 'type' is not a string.
        R"({"messages": [{"role": "user"}], "tool_choice": {"type": {"me": "f"}},
            "tools": [{"type": "function", "function": {"name": "f"}}]})",
        // A tool call id that is not a string.
        R"({"messages": [{"role": "assistant", "tool_calls": [{"id": {"x": 1},
            "function": {"name": "f", "arguments": "{}"}}]}]})",
    };
    for (const char* text : bad)
        EXPECT_EQ(status_of([&] { parse_openai_chat(body(text)); }), 400) << text;
    EXPECT_EQ(status_of([] { body("{"); }), 400);
    EXPECT_EQ(status_of([] { body("[]"); }), 400);
    EXPECT_EQ(status_of([] { parse_openai_completion(body(R"({"prompt": "x", "best_of": 3})")); }),
              400);
    EXPECT_EQ(status_of([] { parse_openai_completion(body(R"({"prompt": {}})")); }), 400);
}

TEST(OpenAIParse, LogitBias) {
    const ChatJob job = parse_openai_chat(body(R"({"messages": [{"role": "user"}],
        "logit_bias": {"7": -100, "3": 2.5, "12": 100}})"));
    const std::vector<std::pair<int32_t, float>> want{{3, 2.5f}, {7, -100.0f}, {12, 100.0f}};
    EXPECT_EQ(job.gen.sampling.logit_bias, want);
    EXPECT_TRUE(parse_openai_chat(body(R"({"messages": [{"role": "user"}], "logit_bias": null})"))
                    .gen.sampling.logit_bias.empty());
    const CompletionJob c =
        parse_openai_completion(body(R"({"prompt": "x", "logit_bias": {"5": -1}})"));
    EXPECT_EQ(c.gen.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, -1.0f}}));
}

TEST(OpenAIParse, VllmConstraintFields) {
    const auto chat = [](const std::string& extra) {
        const std::string text = R"({"messages": [{"role": "user"}], )" + extra + "}";
        return parse_openai_chat(body(text.c_str()));
    };
    ChatJob j = chat(R"("guided_choice": ["yes", "no"])");
    EXPECT_EQ(j.format, ChatJob::Format::Choice);
    EXPECT_EQ(j.choices, (std::vector<std::string>{"yes", "no"}));
    j = chat(R"("structured_outputs": {"choice": ["a"], "disable_any_whitespace": true})");
    EXPECT_EQ(j.choices, std::vector<std::string>{"a"});
    j = chat(R"("guided_json": "{\"type\": \"object\"}")");
    EXPECT_EQ(j.format, ChatJob::Format::JsonSchema);
    EXPECT_EQ(j.schema["type"], "object");
    for (const char* bad : {R"("guided_choice": [])", R"("guided_choice": ["a", 1])",
                            R"("guided_choice": [""])", R"("guided_choice": "a")",
                            R"("guided_choice": ["a"], "guided_json": {})",
                            R"("structured_outputs": {"choice": ["a"], "json": {}})",
                            R"("structured_outputs": {"regex": "a+"})", R"("guided_regex": "a")",
                            R"("guided_choice": ["a"], "response_format": {"type": "json_object"})"})
        EXPECT_EQ(status_of([&] { chat(bad); }), 400) << bad;
}

TEST(OpenAIParse, CompletionPrompts) {
    EXPECT_EQ(parse_openai_completion(body(R"({"prompt": ["a", "b"]})")).prompts.size(), 2u);
    const CompletionJob ids = parse_openai_completion(body(R"({"prompt": [[1, 2], [3]],
        "logprobs": 0, "echo": true})"));
    EXPECT_EQ(ids.prompt_ids.size(), 2u);
    EXPECT_TRUE(ids.gen.logprobs);
    EXPECT_EQ(ids.gen.top_logprobs, 0);
    EXPECT_EQ(*ids.gen.max_tokens, 16); // the OpenAI default
}

std::string param_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const ApiError& e) {
        return e.param();
    }
    return "(accepted)";
}

TEST(Priority, AllEndpointsValidateIt) {
    EXPECT_EQ(
        parse_openai_chat(body(R"({"messages": [{"role": "user"}], "priority": -5})")).gen.priority,
        -5);
    EXPECT_EQ(parse_openai_chat(body(R"({"messages": [{"role": "user"}]})")).gen.priority, 0);
    EXPECT_EQ(parse_openai_completion(body(R"({"prompt": "x", "priority": 1000000})")).gen.priority,
              1000000);
    EXPECT_EQ(parse_anthropic(body(R"({"messages": [{"role": "user", "content": "q"}],
        "max_tokens": 1, "priority": 3})"),
                              false)
                  .gen.priority,
              3);
    for (const char* bad : {"\"1\"", "1.5", "true", "[1]", "{}", "1000001", "-2e6"}) {
        const std::string chat =
            std::string(R"({"messages": [{"role": "user"}], "priority": )") + bad + "}";
        EXPECT_EQ(param_of([&] { parse_openai_chat(body(chat.c_str())); }), "priority") << bad;
        const std::string completion = std::string(R"({"prompt": "x", "priority": )") + bad + "}";
        EXPECT_EQ(param_of([&] { parse_openai_completion(body(completion.c_str())); }), "priority")
            << bad;
        const std::string messages =
            std::string(R"({"messages": [{"role": "user", "content": "q"}], "max_tokens": 1,
                "priority": )") +
            bad + "}";
        EXPECT_EQ(param_of([&] { parse_anthropic(body(messages.c_str()), false); }), "priority")
            << bad;
    }
}

TEST(AnthropicParse, BlocksToolsThinking) {
    const ChatJob job = parse_anthropic(body(R"({
        "system": [{"type": "text", "text": "sys"}], "max_tokens": 9,
        "messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "content": [
                         {"type": "thinking", "thinking": "t", "signature": "s"},
                         {"type": "text", "text": "a"},
                         {"type": "tool_use", "id": "u1", "name": "f", "input": {"x": 1}}]},
                     {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": "u1", "content": [
                             {"type": "text", "text": "r"}]},
                         {"type": "text", "text": "more"}]}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "thinking": {"type": "enabled", "budget_tokens": 64},
        "stop_sequences": ["X"], "top_k": 5})"),
                                        false);
    ASSERT_EQ(job.messages.size(), 5u);
    EXPECT_EQ(job.messages[0]["role"], "system");
    EXPECT_EQ(job.messages[2]["reasoning_content"], "t");
    EXPECT_EQ(job.messages[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);
    EXPECT_EQ(job.messages[3]["role"], "tool");
    EXPECT_EQ(job.messages[3]["content"], "r");
    EXPECT_EQ(job.messages[4]["content"], "more");
    EXPECT_EQ(job.tools[0]["function"]["parameters"]["type"], "object");
    EXPECT_EQ(job.tool_choice.kind, ToolChoice::Kind::Required);
    EXPECT_FALSE(job.parallel_tool_calls);
    EXPECT_EQ(job.template_vars["enable_thinking"], true);
    EXPECT_EQ(job.reasoning_budget, 64);
    EXPECT_FALSE(job.continue_final);
    const ChatJob prefill =
        parse_anthropic(body(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": "The answer"}]})"),
                        false);
    EXPECT_TRUE(prefill.continue_final);
    EXPECT_EQ(prefill.template_vars["enable_thinking"], false);
    EXPECT_EQ(status_of([] {
                  parse_anthropic(body(R"({"messages": [{"role": "user",
        "content": "q"}]})"),
                                  false);
              }),
              400);
    EXPECT_EQ(status_of([] {
                  parse_anthropic(body(R"({"messages": [{"role": "user",
        "content": [{"type": "image"}]}], "max_tokens": 1})"),
                                  false);
              }),
              400);
    EXPECT_EQ(status_of([] {
                  parse_anthropic(body(R"({"messages": [{"role": "user",
        "content": "q"}], "max_tokens": 1, "tools": [{"type": "web_search_20250305",
        "name": "w"}]})"),
                                  false);
              }),
              400);
}

TEST(ErrorShapes, OpenAIAndAnthropic) {
    const ApiError e(429, "busy", "", "");
    const Json o = error_body(ApiStyle::OpenAI, e);
    EXPECT_EQ(o["error"]["type"], "rate_limit_error");
    EXPECT_EQ(o["error"]["message"], "busy");
    EXPECT_TRUE(o["error"]["param"].is_null());
    const Json a = error_body(ApiStyle::Anthropic, ApiError(413, "big"));
    EXPECT_EQ(a["type"], "error");
    EXPECT_EQ(a["error"]["type"], "request_too_large");
    EXPECT_EQ(to_api_error(Error(ErrorCategory::InvalidArgument, "x")).status(), 400);
    EXPECT_EQ(to_api_error(Error(ErrorCategory::Internal, "x")).status(), 500);
}

TEST(Streams, AnthropicEventSequence) {
    AnthropicStream s("msg_1", "m", true);
    std::vector<std::string> names;
    auto add = [&](const std::vector<SseEvent>& events) {
        for (const auto& [name, data] : events) {
            names.push_back(name);
            if (name == "content_block_delta")
                names.back() += ":" + data["delta"]["type"].get<std::string>();
        }
    };
    add(s.start(5));
    ChoiceEvent ev;
    ev.delta.reasoning = "r";
    ev.delta.content = "c";
    ev.delta.tool_calls = {{0, "toolu_0", "f", ""}, {0, "", "", "{\"a\": "}, {0, "", "", "1}"}};
    add(s.events({ev}));
    const std::vector<std::string> want = {"message_start",
                                           "ping",
                                           "content_block_start",
                                           "content_block_delta:thinking_delta",
                                           "content_block_delta:signature_delta",
                                           "content_block_stop",
                                           "content_block_start",
                                           "content_block_delta:text_delta",
                                           "content_block_stop",
                                           "content_block_start",
                                           "content_block_delta:input_json_delta",
                                           "content_block_delta:input_json_delta"};
    EXPECT_EQ(names, want);
}

TEST(Streams, OpenAIToolCallDeltasMerge) {
    GenOptions gen;
    const auto dir = std::filesystem::path(NINFER_TEXT_FIXTURES) / "tiny_chat";
    const text::Tokenizer tok = text::Tokenizer::from_model_dir(dir);
    OpenAIStream s({"id", 1, "m"}, true, gen, true, tok, 1);
    ChoiceEvent ev;
    ev.delta.tool_calls = {{0, "call_0", "f", "{\"a\""}, {0, "", "", ": 1}"}};
    ev.finish = Finish::Stop;
    const auto chunks = s.events({ev});
    ASSERT_EQ(chunks.size(), 1u);
    const Json& call = chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    EXPECT_EQ(call["id"], "call_0");
    EXPECT_EQ(call["function"]["name"], "f");
    EXPECT_EQ(call["function"]["arguments"], "{\"a\": 1}");
    EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Constraints, ForcedLiteralAfterReasoning) {
    const auto dir = std::filesystem::path(NINFER_TEXT_FIXTURES) / "tiny_chat";
    const text::Tokenizer tok = text::Tokenizer::from_model_dir(dir);
    ConstraintPlan plan;
    plan.starts_in_reasoning = true;
    plan.reasoning_budget = 2;
    plan.literals = {"<tool_call>\n<function=f>\n"};
    plan.stop_ids = {298};
    auto c = make_plan_constraint(tok, plan);
    std::vector<uint8_t> mask(size_t(tok.vocab_size()), 0);
    c->allowed(mask);
    EXPECT_EQ(mask[298], 0); // no end of turn while something is forced
    EXPECT_EQ(mask[65], 1);
    c->accept(65);
    c->accept(66); // the budget is spent: "\n</think>\n\n" then the literal are forced
    std::string out;
    for (int step = 0; step < 64; ++step) {
        std::fill(mask.begin(), mask.end(), 0);
        c->allowed(mask);
        int chosen = -1;
        for (size_t id = 0; id < mask.size(); ++id)
            if (mask[id]) chosen = int(id); // any allowed token (the last) must keep the text
        ASSERT_GE(chosen, 0);
        const std::string want = "\n</think>\n\n<tool_call>\n<function=f>\n";
        if (out == want) break;
        out += tok.token_bytes(chosen);
        c->accept(chosen);
        ASSERT_EQ(want.compare(0, out.size(), out), 0) << out;
    }
    std::fill(mask.begin(), mask.end(), 0);
    c->allowed(mask); // free afterwards
    EXPECT_EQ(mask[298], 1);
}

// Choices where one is a prefix of another (guided_choice ["yes", "yes!"]): after "yes" both the
// end and "!" may come; after "yes!" only the end; nothing else ever.
TEST(Constraints, LiteralChoicesThatPrefixEachOther) {
    const auto dir = std::filesystem::path(NINFER_TEXT_FIXTURES) / "tiny_chat";
    const text::Tokenizer tok = text::Tokenizer::from_model_dir(dir);
    struct EndOnly final : TokenConstraint {
        int accepted = 0;
        void allowed(std::vector<uint8_t>& mask) override { mask[298] = 1; }
        void accept(int32_t) override { ++accepted; }
    };
    const auto byte_token = [&](char c) {
        for (int32_t id = 0; id < tok.vocab_size(); ++id)
            if (tok.token_bytes(id) == std::string(1, c)) return id;
        return int32_t(-1);
    };
    for (const std::string& want : {std::string("yes"), std::string("yes!")}) {
        auto end = std::make_shared<EndOnly>();
        ConstraintPlan plan;
        plan.literals = {"yes", "yes!"};
        plan.tail = end;
        auto c = make_plan_constraint(tok, plan);
        std::vector<uint8_t> mask(size_t(tok.vocab_size()), 0);
        for (char ch : want) {
            std::fill(mask.begin(), mask.end(), 0);
            c->allowed(mask);
            const int32_t id = byte_token(ch);
            ASSERT_GE(id, 0);
            ASSERT_EQ(mask[size_t(id)], 1) << want << ": '" << ch << "' refused";
            EXPECT_EQ(mask[size_t(byte_token('x'))], 0);
            c->accept(id);
        }
        std::fill(mask.begin(), mask.end(), 0);
        c->allowed(mask);
        EXPECT_EQ(mask[298], 1) << want << ": the end refused";
        EXPECT_EQ(mask[size_t(byte_token('!'))], want == "yes" ? 1 : 0) << want;
        c->accept(298);
        EXPECT_EQ(end->accepted, 1) << want << ": the end did not reach the tail";
    }
}

TEST(Budgets, ReasoningEffortServerDefaultAndStructuredReserve) {
    auto chat =
        [](const char* extra) {
            return parse_openai_chat(body((std::string(R"({"messages": [{"role": "user",
            "content": "q"}])") + extra + "}")
                                              .c_str()));
        };
    EXPECT_EQ(chat(R"(, "reasoning_effort": "low")").reasoning_budget, 512);
    EXPECT_EQ(chat(R"(, "reasoning_effort": "medium")").reasoning_budget, 2048);
    EXPECT_EQ(chat(R"(, "reasoning_effort": "high")").reasoning_budget, 8192);
    const ChatJob none = chat(R"(, "reasoning_effort": "none")");
    EXPECT_FALSE(none.reasoning_budget);
    EXPECT_EQ(none.template_vars["enable_thinking"], false);
    ModelContext m;
    const ChatJob plain = chat("");
    EXPECT_EQ(reasoning_budget(m, plain, 4096), -1); // unlimited by default
    m.default_reasoning_budget = 300;
    EXPECT_EQ(reasoning_budget(m, plain, 4096), 300);
    EXPECT_EQ(reasoning_budget(m, chat(R"(, "reasoning_effort": "low")"), 4096), 512);
    m.default_reasoning_budget = -1;
    // Structured output: at most max_tokens minus the reserve (half, at most 1024), and for a
    // forced tool at least the shortest call plus the slack.
    const ChatJob js = chat(R"(, "response_format": {"type": "json_object"})");
    EXPECT_EQ(reasoning_budget(m, js, 256), 128);
    EXPECT_EQ(reasoning_budget(m, js, 8192), 8192 - 1024);
    ChatJob js_budget = chat(R"(, "response_format": {"type": "json_object"},
        "reasoning_effort": "high")");
    EXPECT_EQ(reasoning_budget(m, js_budget, 4096), 4096 - 1024);
    EXPECT_EQ(reasoning_budget(m, js_budget, 100000), 8192);
    const ChatJob forced = chat(R"(, "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "required")");
    EXPECT_EQ(reasoning_budget(m, forced, 256, 150), 256 - 150 - kAnswerSlack);
    EXPECT_EQ(reasoning_budget(m, forced, 100, 150), 0);
}

TEST(Constraints, BudgetZeroClosesReasoningThenWholeToolCall) {
    const auto dir = std::filesystem::path(NINFER_TEXT_FIXTURES) / "tiny_chat";
    const text::Tokenizer tok = text::Tokenizer::from_model_dir(dir);
    const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties":
        {"n": {"type": "integer"}}, "required": ["n"]}}}])");
    ConstraintPlan plan;
    plan.starts_in_reasoning = true;
    plan.reasoning_budget = 0;
    plan.max_tokens = 200;
    plan.stop_ids = {298};
    plan.tool_tail = [&](const std::string& lead, int left) {
        text::ToolCallConstraintOptions o;
        o.lead = lead;
        o.max_tokens = left;
        o.parallel = false;
        return text::make_tool_call_constraint(tools, tok, {298}, o);
    };
    auto c = make_plan_constraint(tok, plan);
    std::vector<uint8_t> mask(size_t(tok.vocab_size()), 0);
    std::string out;
    int step = 0;
    for (; step < 200; ++step) {
        std::fill(mask.begin(), mask.end(), 0);
        c->allowed(mask);
        int chosen = -1;
        for (size_t id = 0; id < mask.size(); ++id)
            if (mask[id]) chosen = int(id); // the last allowed token
        ASSERT_GE(chosen, 0);
        c->accept(chosen);
        if (chosen == 298) break;
        out += tok.token_bytes(chosen);
    }
    EXPECT_LT(step, 200);
    EXPECT_EQ(out.rfind("\n</think>\n\n<tool_call>\n<function=f>\n<parameter=n>\n", 0), 0u) << out;
    EXPECT_NE(out.find("\n</parameter>\n</function>\n</tool_call>"), std::string::npos) << out;
}

TEST(Metrics, PrometheusText) {
    Metrics m;
    m.request("/v1/chat/completions", 200);
    m.finished("cancelled");
    m.tokens(10, 5, 4);
    m.tokens(3, 1);
    m.ttft(0.2);
    m.inter_token(2, 0.02);
    EngineStats e;
    e.kv_blocks_total = 10;
    e.kv_blocks_used = 5;
    e.kv_blocks_cached = 3;
    e.prefix_query_tokens = 200;
    e.prefix_hit_tokens = 50;
    e.snapshots_device = 6;
    e.snapshots_device_total = 64;
    e.snapshots_host = 2;
    e.preemptions = 7;
    const std::string text = m.render(e, MemoryStats{}, 1, 12);
    for (const char* line :
         {"ninfer_prompt_tokens_total 13", "ninfer_prompt_tokens_cached_total 4",
          "ninfer_prefix_cache_queries_tokens_total 200",
          "ninfer_prefix_cache_hits_tokens_total 50", "ninfer_prefix_cache_hit_rate 0.25",
          "ninfer_kv_blocks_cached 3", "ninfer_prefix_snapshots{tier=\"device\"} 6",
          "ninfer_prefix_snapshots{tier=\"host\"} 2", "ninfer_prefix_snapshots_total_slots 64",
          "ninfer_preemptions_total 7", "# TYPE ninfer_preemptions_total counter",
          "# TYPE ninfer_prefix_cache_hit_rate gauge"})
        EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line;
    EXPECT_NE(Metrics()
                  .render(EngineStats{}, MemoryStats{}, 0, 1)
                  .find("ninfer_prefix_cache_hit_rate 0\n"),
              std::string::npos); // no lookups yet: 0, not NaN
    EXPECT_NE(
        text.find("ninfer_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1"),
        std::string::npos);
    EXPECT_NE(text.find("ninfer_generations_finished_total{reason=\"cancelled\"} 1"),
              std::string::npos);
    EXPECT_NE(text.find("ninfer_time_to_first_token_seconds_bucket{le=\"0.25\"} 1"),
              std::string::npos);
    EXPECT_NE(text.find("ninfer_inter_token_latency_seconds_count 2"), std::string::npos);
    EXPECT_NE(text.find("ninfer_kv_cache_usage_ratio 0.5"), std::string::npos);
}

// Fuzz findings: fields whose 'type' is an object, not a string, are 400s naming their field.
TEST(AnthropicParse, NonStringTypesAreBadRequests) {
    const char* bad[] = {
        R"({"max_tokens": 8, "messages": [{"role": "user", "content": "q"}],
            "output_config": {"format": {"type": {"a": 1}, "schema": {}}}})",
        R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image",
            "source": {"type": {"a": 1}, "data": "x"}}]}]})",
    };
    for (const char* text : bad)
        EXPECT_EQ(status_of([&] { parse_anthropic(body(text), false); }), 400) << text;
}

// Continuing a final assistant message renders its text; one without text (null content, a
// tool call) continues from an empty message, and one whose content is not text is a 400.
TEST(ChatRender, ContinueFinalMessageOfAnyContent) {
    const text::ChatTemplate tpl = text::ChatTemplate::from_model_dir(
        std::filesystem::path(NINFER_TEXT_FIXTURES) / "tiny_chat");
    ModelContext m;
    m.chat_template = &tpl;
    ChatJob job;
    job.continue_final = true;
    job.add_generation_prompt = false;
    job.messages = Json::array({{{"role", "user"}, {"content", "q"}},
                                {{"role", "assistant"}, {"content", "The answer"}}});
    const std::string text = render_chat(m, job);
    EXPECT_EQ(text.substr(text.size() - 10), "The answer");
    job.messages[1]["content"] = nullptr;
    EXPECT_NO_THROW(render_chat(m, job));
    job.messages[1]["content"] = 7;
    EXPECT_EQ(status_of([&] { render_chat(m, job); }), 400);
}

} // namespace
} // namespace ninfer::server
