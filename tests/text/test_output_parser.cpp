// The output parser on a table of real and malformed model outputs, each fed whole, character
// by character and in pseudo-random chunks: the results must be identical and as expected.
#include <gtest/gtest.h>
#include <random>

#include "text/output_parser.h"

using namespace ninfer::text;
using json = nlohmann::ordered_json;

namespace {

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}, "temp": {"type": "number"}, "metric": {"type": "boolean"},
    "hours": {"type": "array"}, "opts": {"type": "object"}, "note": {"type": ["string", "null"]}}}}}])");

struct Case {
    const char* name;
    bool starts_in_reasoning;
    std::string output;
    std::string reasoning;
    std::string content;
    std::vector<std::pair<std::string, std::string>> calls; // name, arguments
    std::vector<std::string> stop = {};
};

struct Result {
    std::string reasoning, content;
    std::vector<std::pair<std::string, std::string>> calls;
    bool operator==(const Result&) const = default;
};

void PrintTo(const Result& r, std::ostream* os) {
    *os << "reasoning=[" << r.reasoning << "] content=[" << r.content << "] calls=";
    for (const auto& [n, a] : r.calls) *os << "(" << n << " " << a << ")";
}

Result parse(const Case& c, int mode) {
    ParserOptions o;
    o.starts_in_reasoning = c.starts_in_reasoning;
    o.tools = kTools;
    o.stop = c.stop;
    OutputParser p(o);
    Result r;
    const auto add = [&](const ParsedDelta& d) {
        r.reasoning += d.reasoning;
        r.content += d.content;
        for (const auto& t : d.tool_calls) {
            if (size_t(t.index) >= r.calls.size()) r.calls.resize(size_t(t.index) + 1);
            if (!t.name.empty()) r.calls[size_t(t.index)].first = t.name;
            r.calls[size_t(t.index)].second += t.arguments;
        }
    };
    std::mt19937 rng{static_cast<unsigned>(mode)};
    for (size_t i = 0; i < c.output.size();) {
        size_t n = mode == 0 ? c.output.size() : mode == 1 ? 1 : 1 + rng() % 9;
        size_t end = std::min(c.output.size(), i + n);
        while (end < c.output.size() && (static_cast<unsigned char>(c.output[end]) & 0xC0) == 0x80)
            ++end;
        add(p.push(std::string_view(c.output).substr(i, end - i)));
        i = end;
        if (p.stopped()) break;
    }
    add(p.finish());
    EXPECT_EQ(r.reasoning, p.reasoning());
    EXPECT_EQ(r.content, p.content());
    EXPECT_EQ(r.calls.size(), p.tool_calls().size());
    return r;
}

const std::vector<Case>& cases() {
    static const std::vector<Case> k = {
        {"plain answer", false, "Hello there!", "", "Hello there!", {}},
        {"thinking, prompt opened <think>",
         true,
         "Let me see.\n</think>\n\nIt is 4.",
         "Let me see.",
         "It is 4.",
         {}},
        {"model repeats <think>", true, "<think>\nhmm\n</think>\n\nok", "hmm", "ok", {}},
        {"model opens <think> itself",
         false,
         "<think>\nplan\n</think>\n\nanswer",
         "plan",
         "answer",
         {}},
        {"EOS inside reasoning",
         true,
         "still thinking about it ",
         "still thinking about it",
         "",
         {}},
        {"empty reasoning (thinking off)", false, "\n\nDirect.", "", "Direct.", {}},
        {"tags inside text are kept",
         false,
         "Use a < b and <b>bold</b> and <tool",
         "",
         "Use a < b and <b>bold</b> and <tool",
         {}},
        {"one call, typed by schema",
         true,
         "I should call the "
         "tool.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
         "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=temp>\n21.50\n</parameter>\n"
         "<parameter=metric>\nTrue\n</parameter>\n<parameter=hours>\n[1, 2.5]\n</parameter>\n"
         "<parameter=opts>\n{\"a\": "
         "null}\n</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>\n</tool_call>",
         "I should call the tool.",
         "",
         {{"get_weather",
           R"({"city": "Paris", "days": 3, "temp": 21.5, "metric": true, "hours": [1, 2.5], "opts": {"a": null}, "note": null})"}}},
        {"content then two calls",
         false,
         "Checking "
         "both.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</"
         "function>\n"
         "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</"
         "parameter>\n</function>\n</tool_call>",
         "",
         "Checking both.",
         {{"get_weather", R"({"city": "Oslo"})"}, {"get_weather", R"({"city": "Rome"})"}}},
        {"JSON inside <tool_call> (drift)",
         false,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"days\": "
         "2}}\n</tool_call>",
         "",
         "",
         {{"get_weather", R"({"city": "東京", "days": 2})"}}},
        {"JSON with string arguments",
         false,
         "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
         "",
         "",
         {{"f", R"({"x": 1})"}}},
        {"missing closing tags at end",
         false,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n",
         "",
         "",
         {{"get_weather", R"({"city": "Lima"})"}}},
        {"missing </parameter> between parameters",
         false,
         "<tool_call><function=get_weather><parameter=city>Kyiv<parameter=days>5</function></"
         "tool_call>",
         "",
         "",
         {{"get_weather", R"({"city": "Kyiv", "days": 5})"}}},
        {"bare <function=...> block and stray </tool_call>",
         false,
         "<function=get_weather>\n<parameter=city>\nBonn\n</parameter>\n</function>\n</tool_call>",
         "",
         "",
         {{"get_weather", R"({"city": "Bonn"})"}}},
        {"extra whitespace and no arguments",
         false,
         "  <tool_call>  <function= get_weather >  </function>  </tool_call>  ",
         "",
         "",
         {{"get_weather", "{}"}}},
        {"unknown parameter and bad number stay strings",
         false,
         "<tool_call><function=get_weather><parameter=days>\nthree\n</"
         "parameter><parameter=zz>\n7\n</parameter></function></tool_call>",
         "",
         "",
         {{"get_weather", R"({"days": "three", "zz": "7"})"}}},
        {"multi-line string value keeps inner newlines",
         false,
         "<tool_call>\n<function=w>\n<parameter=code>\ndef f():\n    return "
         "1\n\n</parameter>\n</function>\n</tool_call>",
         "",
         "",
         {{"w", R"({"code": "def f():\n    return 1\n"})"}}},
        {"missing </tool_call> before next call",
         false,
         "<tool_call><function=a></function>\n<tool_call><function=b></function></tool_call>",
         "",
         "",
         {{"a", "{}"}, {"b", "{}"}}},
        {"garbage tool call becomes content",
         false,
         "<tool_call>not a call</tool_call> after",
         "",
         "<tool_call>not a call</tool_call> after",
         {}},
        {"stop string in content", false, "one two STOP three", "", "one two", {}, {"STOP"}},
        {"stop string split across chunks, longest wins",
         false,
         "abc<|im_end|>def",
         "",
         "abc",
         {},
         {"<|im", "<|im_end|>"}},
        {"stop string in reasoning",
         true,
         "thinking END more</think>x",
         "thinking",
         "",
         {},
         {"END"}},
        {"partial stop string at the end is released",
         false,
         "ends with ST",
         "",
         "ends with ST",
         {},
         {"STOP"}},
    };
    return k;
}

} // namespace

TEST(OutputParser, TableWholeCharByCharAndChunked) {
    for (const Case& c : cases()) {
        const Result want{c.reasoning, c.content, c.calls};
        for (int mode = 0; mode < 6; ++mode)
            EXPECT_EQ(parse(c, mode), want) << c.name << " mode " << mode;
    }
}

TEST(OutputParser, StreamsArgumentsPerParameter) {
    ParserOptions o;
    o.tools = kTools;
    OutputParser p(o);
    auto d = p.push("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n");
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.tool_calls[0].id, "call_0");
    EXPECT_EQ(d.tool_calls[1].arguments, R"({"city": "Paris")");
    d = p.push("<parameter=days>\n2");
    EXPECT_TRUE(d.tool_calls.empty()); // the value may continue
    d = p.push("\n</parameter>\n</function>\n</tool_call>");
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0].arguments + d.tool_calls[1].arguments, R"(, "days": 2})");
    EXPECT_EQ(
        openai_tool_call(p.tool_calls()[0]).dump(),
        R"({"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 2}"}})");
    EXPECT_EQ(
        anthropic_tool_use(p.tool_calls()[0]).dump(),
        R"({"type":"tool_use","id":"call_0","name":"get_weather","input":{"city":"Paris","days":2}})");
}

TEST(OutputParser, HoldsBackPossibleTags) {
    OutputParser p(ParserOptions{});
    EXPECT_EQ(p.push("Hello <tool").content, "Hello");
    EXPECT_EQ(p.push("box>").content, " <toolbox>");
}

TEST(OutputParser, PromptOpensReasoning) {
    EXPECT_TRUE(
        prompt_opens_reasoning("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_reasoning(
        "<|im_start|>user\n<think>?</think><|im_end|>\n<|im_start|>assistant\n"));
}

TEST(OutputParser, TypesByResolvedRefsEnumsAndJsonFallbacks) {
    ParserOptions o;
    o.tools = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {
          "mode": {"$ref": "#/$defs/mode"}, "n": {"$ref": "#/$defs/n"},
          "x": {"type": ["number", "boolean"]}, "s": {"type": "string"}},
        "$defs": {"mode": {"enum": ["fast", 3, true]}, "n": {"type": "integer"}}}}}])");
    auto args = [&](const std::string& params) {
        OutputParser p(o);
        p.push("<tool_call>\n<function=f>\n" + params + "</function>\n</tool_call>");
        p.finish();
        return json::parse(p.tool_calls().at(0).arguments);
    };
    auto param = [](const char* k, const char* v) {
        return std::string("<parameter=") + k + ">\n" + v + "\n</parameter>\n";
    };
    EXPECT_EQ(args(param("mode", "fast"))["mode"], "fast");
    EXPECT_EQ(args(param("mode", "3"))["mode"], 3); // a non-string member spelled as JSON
    EXPECT_EQ(args(param("mode", "true"))["mode"], true);
    EXPECT_EQ(args(param("n", "42"))["n"], 42);     // the $ref's type
    EXPECT_EQ(args(param("x", "true"))["x"], true); // not a number: tried as JSON
    EXPECT_EQ(args(param("x", "2.5"))["x"], 2.5);
    EXPECT_EQ(args(param("s", "3"))["s"], "3");
}
