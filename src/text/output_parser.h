// Incremental parser of generated text (Qwen3.5/3.6/3.8 output): stop strings, the reasoning
// channel (<think>...</think>, also when the prompt already opened it), and tool calls in the
// qwen3_coder XML format turned into OpenAI/Anthropic tool-call JSON typed by the tools' JSON
// schemas. Feed decoded text as it is generated (any chunking: token by token, char by char or
// whole); every push returns what became certain, and the concatenated deltas equal the final
// result. Tolerant of real drift: JSON inside <tool_call>, a bare <function=...> block,
// missing closing tags at the end of output, extra whitespace, several calls, <think> repeated
// by the model, EOS inside the reasoning.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "text/stop_matcher.h"

namespace ninfer::text {

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments; // a JSON object, formatted like Python json.dumps
};

// Part of a tool call: the first delta of call `index` carries id and name; later ones append
// to the arguments text (OpenAI streaming semantics).
struct ToolCallDelta {
    int index = 0;
    std::string id;
    std::string name;
    std::string arguments;
};

struct ParsedDelta {
    std::string reasoning;
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ParserOptions {
    bool starts_in_reasoning = false; // the prompt ends inside <think> (see prompt_opens_reasoning)
    bool parse_tool_calls = true;
    nlohmann::ordered_json tools = nlohmann::ordered_json::array(); // OpenAI tools (types)
    std::vector<std::string> stop;                                  // stop strings
    std::string id_prefix = "call_";                                // tool call ids: prefix + index
};

class OutputParser {
public:
    explicit OutputParser(ParserOptions options);

    // Feeds generated text (valid UTF-8). Returns the newly certain reasoning, content and tool
    // call deltas; text that may still turn into a tag or a stop string is held back.
    ParsedDelta push(std::string_view text);
    // End of generation: releases held text and closes an unterminated tool call.
    ParsedDelta finish();

    bool stopped() const { return stop_.stopped(); } // a stop string matched
    const std::string& stop_string() const { return stop_.matched(); }
    bool in_reasoning() const { return state_ == State::Reasoning; }
    // Totals so far.
    const std::string& reasoning() const { return reasoning_; }
    const std::string& content() const { return content_; }
    const std::vector<ToolCall>& tool_calls() const { return calls_; }

    enum class State { Reasoning, Content, ToolCall };

private:
    void run(ParsedDelta& d, bool final);
    bool step_reasoning(ParsedDelta& d, bool final);
    bool step_content(ParsedDelta& d, bool final);
    bool step_tool_call(ParsedDelta& d, bool final);
    void emit_reasoning(ParsedDelta& d, std::string text, bool final_part);
    void emit_content(ParsedDelta& d, std::string text, bool final_part);
    // Returns false when the block was not a tool call (it is emitted as content).
    bool close_call(ParsedDelta& d, bool final);
    bool close_json_call(ParsedDelta& d, const std::string& body);
    bool parse_xml_call(ParsedDelta& d, bool closed);
    bool not_a_call(ParsedDelta& d);
    void send(ParsedDelta& d, const std::string& name, const std::string& args, bool header);
    void reset_call();

    ParserOptions opt_;
    StopMatcher stop_;
    State state_;
    std::string pending_;      // released by the stop matcher, not yet parsed
    std::string ws_reasoning_; // trailing whitespace of reasoning, held until more text
    std::string ws_content_;   // same for content
    bool reasoning_started_ = false;
    bool content_started_ = false;
    bool after_call_ = false; // content after a tool call: a stray </tool_call> is dropped
    std::string reasoning_, content_;
    std::vector<ToolCall> calls_;
    // the tool call being parsed
    std::string block_; // text after <tool_call> (or from <function=)
    bool bare_function_ = false;
    bool closed_by_tag_ = false; // the block ended with its closing tag
    size_t block_pos_ = 0;       // parsed up to here
    bool header_sent_ = false;
    int params_sent_ = 0;
};

// True when the last assistant turn of a rendered prompt opened <think> without closing it
// (the Qwen templates end the prompt with "<think>\n" unless thinking is off).
bool prompt_opens_reasoning(std::string_view prompt);

// OpenAI {"id", "type": "function", "function": {"name", "arguments"}} and Anthropic
// {"type": "tool_use", "id", "name", "input"} forms of a parsed call.
nlohmann::ordered_json openai_tool_call(const ToolCall& call);
nlohmann::ordered_json anthropic_tool_use(const ToolCall& call);

} // namespace ninfer::text
