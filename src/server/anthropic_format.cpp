// Generation results into Anthropic Message objects and stream events.
#include "server/anthropic_api.h"

namespace ninfer::server {
namespace {

using json = nlohmann::ordered_json;

// Anthropic's split of the prompt: input_tokens are those not read from the cache,
// cache_read_input_tokens those that were (the prefix cache is automatic: nothing is written on
// request, so cache_creation_input_tokens is 0); the prompt is their sum.
json usage(int prompt, int cached, int output) {
    return {{"input_tokens", prompt - cached},
            {"output_tokens", output},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached}};
}

} // namespace

const char* anthropic_stop_reason(const ChoiceResult& r, bool tool_use) {
    switch (r.finish) {
    case Finish::Length:
        return "max_tokens";
    case Finish::StopString:
        return "stop_sequence";
    default:
        return tool_use ? "tool_use" : "end_turn";
    }
}

json anthropic_response(const std::string& id, const std::string& model, const Generation& g,
                        const ChatJob& job) {
    const ChoiceResult& r = g.result(0);
    json content = json::array();
    if (!r.reasoning.empty())
        content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
    if (!r.content.empty() || (r.tool_calls.empty() && content.empty()))
        content.push_back({{"type", "text"}, {"text", r.content}});
    for (const auto& call : r.tool_calls) {
        content.push_back(json(text::anthropic_tool_use(call)));
        if (!job.parallel_tool_calls) break;
    }
    return {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", content},
            {"stop_reason", anthropic_stop_reason(r, !r.tool_calls.empty())},
            {"stop_sequence", r.stop_string.empty() ? json() : json(r.stop_string)},
            {"usage", usage(g.prompt_tokens(), g.cached_tokens(), g.completion_tokens())}};
}

AnthropicStream::AnthropicStream(std::string id, std::string model, bool parallel)
    : id_(std::move(id)), model_(std::move(model)), parallel_(parallel) {}

std::vector<SseEvent> AnthropicStream::start(int input_tokens) {
    json msg = {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", usage(input_tokens, 0, 0)}}; // the cache is not looked up yet
    return {{"message_start", {{"type", "message_start"}, {"message", msg}}},
            {"ping", {{"type", "ping"}}}};
}

void AnthropicStream::open(std::vector<SseEvent>& out, const std::string& type, json block) {
    close(out);
    ++index_;
    open_ = type;
    out.push_back({"content_block_start",
                   {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}});
}

void AnthropicStream::close(std::vector<SseEvent>& out) {
    if (open_.empty()) return;
    if (open_ == "thinking") delta(out, {{"type", "signature_delta"}, {"signature", ""}});
    out.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
    open_.clear();
    call_ = -1;
}

void AnthropicStream::delta(std::vector<SseEvent>& out, json d) {
    out.push_back({"content_block_delta",
                   {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}}});
}

std::vector<SseEvent> AnthropicStream::events(const std::vector<ChoiceEvent>& events) {
    std::vector<SseEvent> out;
    for (const auto& ev : events) {
        if (!ev.delta.reasoning.empty()) {
            if (open_ != "thinking")
                open(out, "thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
            delta(out, {{"type", "thinking_delta"}, {"thinking", ev.delta.reasoning}});
        }
        if (!ev.delta.content.empty()) {
            if (open_ != "text") open(out, "text", {{"type", "text"}, {"text", ""}});
            delta(out, {{"type", "text_delta"}, {"text", ev.delta.content}});
        }
        for (const auto& c : ev.delta.tool_calls) {
            if (!parallel_ && c.index > 0) continue;
            if (!c.name.empty() || c.index != call_) {
                open(out, "tool_use",
                     {{"type", "tool_use"},
                      {"id", c.id},
                      {"name", c.name},
                      {"input", json::object()}});
                call_ = c.index;
                tool_use_ = true;
            }
            if (!c.arguments.empty())
                delta(out, {{"type", "input_json_delta"}, {"partial_json", c.arguments}});
        }
    }
    return out;
}

std::vector<SseEvent> AnthropicStream::finish(const Generation& g) {
    std::vector<SseEvent> out;
    const ChoiceResult& r = g.result(0);
    if (index_ < 0) open(out, "text", {{"type", "text"}, {"text", ""}});
    close(out);
    out.push_back(
        {"message_delta",
         {{"type", "message_delta"},
          {"delta",
           {{"stop_reason", anthropic_stop_reason(r, tool_use_)},
            {"stop_sequence", r.stop_string.empty() ? json() : json(r.stop_string)}}},
          {"usage", usage(g.prompt_tokens(), g.cached_tokens(), g.completion_tokens())}}});
    out.push_back({"message_stop", {{"type", "message_stop"}}});
    return out;
}

} // namespace ninfer::server
