// Generation results into Responses API objects and stream events.
#include "server/prepare.h"
#include "server/responses_api.h"

namespace ninfer::server {
namespace {

using json = nlohmann::ordered_json;

json usage(const Generation& g) {
    const int prompt = g.prompt_tokens(), output = g.completion_tokens();
    return {{"input_tokens", prompt},
            {"input_tokens_details", {{"cached_tokens", g.cached_tokens()}}},
            {"output_tokens", output},
            {"output_tokens_details", {{"reasoning_tokens", g.reasoning_tokens()}}},
            {"total_tokens", prompt + output}};
}

json echoed(const Json& request, const char* key, json fallback) {
    const auto it = request.find(key);
    return it == request.end() || it->is_null() ? fallback : json(*it);
}

std::string new_id(std::string& slot, const char* prefix) {
    if (slot.empty()) slot = prefix + random_hex(24);
    return slot;
}

json reasoning_item(const std::string& id, const std::string& text, const char* status) {
    json content = json::array();
    if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
    return {{"type", "reasoning"},
            {"id", id},
            {"summary", json::array()},
            {"content", content},
            {"status", status}};
}

json text_part(const std::string& text) {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", json::array()},
            {"logprobs", json::array()}};
}

json message_item(const std::string& id, const std::string* text, const char* status) {
    json content = json::array();
    if (text) content.push_back(text_part(*text));
    return {{"type", "message"},
            {"id", id},
            {"status", status},
            {"role", "assistant"},
            {"content", content}};
}

} // namespace

json responses_object(const ResponseEcho& echo, const Generation* g, const ChatJob& job,
                      ResponseItemIds& ids, bool in_progress) {
    const Json& req = echo.request;
    json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
    if (const auto it = req.find("reasoning"); it != req.end() && it->is_object())
        reasoning["effort"] = echoed(*it, "effort", nullptr);
    json r = {{"id", echo.id},
              {"object", "response"},
              {"created_at", echo.created_at},
              {"status", "in_progress"},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", echoed(req, "instructions", nullptr)},
              {"max_output_tokens", echoed(req, "max_output_tokens", nullptr)},
              {"model", echo.model},
              {"output", json::array()},
              {"parallel_tool_calls", job.parallel_tool_calls},
              {"previous_response_id", echoed(req, "previous_response_id", nullptr)},
              {"reasoning", reasoning},
              {"store", echo.stored},
              {"temperature", echoed(req, "temperature", nullptr)},
              {"text", echoed(req, "text", {{"format", {{"type", "text"}}}})},
              {"tool_choice", echoed(req, "tool_choice", "auto")},
              {"tools", echoed(req, "tools", json::array())},
              {"top_p", echoed(req, "top_p", nullptr)},
              {"truncation", "disabled"},
              {"metadata", echoed(req, "metadata", json::object())},
              {"usage", nullptr}};
    if (in_progress || !g) return r;
    const ChoiceResult& res = g->result(0);
    json& output = r["output"];
    if (!res.reasoning.empty())
        output.push_back(reasoning_item(new_id(ids.reasoning, "rs_"), res.reasoning, "completed"));
    if (!res.content.empty() || res.tool_calls.empty())
        output.push_back(message_item(new_id(ids.message, "msg_"), &res.content, "completed"));
    for (size_t i = 0; i < res.tool_calls.size(); ++i) {
        if (i > 0 && !job.parallel_tool_calls) break;
        if (ids.calls.size() <= i) ids.calls.push_back("fc_" + random_hex(24));
        const text::ToolCall& c = res.tool_calls[i];
        output.push_back({{"type", "function_call"},
                          {"id", ids.calls[i]},
                          {"call_id", c.id},
                          {"name", c.name},
                          {"arguments", c.arguments},
                          {"status", "completed"}});
    }
    const bool truncated = res.finish == Finish::Length;
    r["status"] = truncated ? "incomplete" : "completed";
    if (truncated) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["usage"] = usage(*g);
    return r;
}

ResponsesStream::ResponsesStream(ResponseEcho echo, ChatJob job)
    : echo_(std::move(echo)), job_(std::move(job)) {}

ResponsesEvent ResponsesStream::event(const std::string& type, json data) {
    json e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : data.items()) e[k] = v;
    return {type, e};
}

std::vector<ResponsesEvent> ResponsesStream::start() {
    const json r = responses_object(echo_, nullptr, job_, ids_, true);
    return {event("response.created", {{"response", r}}),
            event("response.in_progress", {{"response", r}})};
}

void ResponsesStream::open(std::vector<ResponsesEvent>& out, const std::string& kind) {
    close(out);
    ++output_index_;
    open_ = kind;
    text_.clear();
    json item;
    if (kind == "reasoning")
        item = reasoning_item(new_id(ids_.reasoning, "rs_"), "", "in_progress");
    else if (kind == "message")
        item = message_item(new_id(ids_.message, "msg_"), nullptr, "in_progress");
    else
        item = call_item_;
    out.push_back(event("response.output_item.added",
                        {{"output_index", output_index_}, {"item", item}}));
    const std::string id = item["id"];
    if (kind == "reasoning")
        out.push_back(event("response.content_part.added",
                            {{"item_id", id},
                             {"output_index", output_index_},
                             {"content_index", 0},
                             {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
    else if (kind == "message")
        out.push_back(event("response.content_part.added", {{"item_id", id},
                                                            {"output_index", output_index_},
                                                            {"content_index", 0},
                                                            {"part", text_part("")}}));
}

void ResponsesStream::close(std::vector<ResponsesEvent>& out) {
    if (open_.empty()) return;
    const json where = {{"output_index", output_index_}};
    if (open_ == "reasoning") {
        const std::string& id = ids_.reasoning;
        const json part = {{"type", "reasoning_text"}, {"text", text_}};
        out.push_back(event("response.reasoning_text.done", {{"item_id", id},
                                                             {"output_index", output_index_},
                                                             {"content_index", 0},
                                                             {"text", text_}}));
        out.push_back(event("response.content_part.done", {{"item_id", id},
                                                           {"output_index", output_index_},
                                                           {"content_index", 0},
                                                           {"part", part}}));
        out.push_back(event("response.output_item.done",
                            {{"output_index", output_index_},
                             {"item", reasoning_item(id, text_, "completed")}}));
    } else if (open_ == "message") {
        const std::string& id = ids_.message;
        out.push_back(event("response.output_text.done", {{"item_id", id},
                                                          {"output_index", output_index_},
                                                          {"content_index", 0},
                                                          {"text", text_},
                                                          {"logprobs", json::array()}}));
        out.push_back(event("response.content_part.done", {{"item_id", id},
                                                           {"output_index", output_index_},
                                                           {"content_index", 0},
                                                           {"part", text_part(text_)}}));
        out.push_back(event("response.output_item.done",
                            {{"output_index", output_index_},
                             {"item", message_item(id, &text_, "completed")}}));
    } else {
        call_item_["arguments"] = text_;
        call_item_["status"] = "completed";
        out.push_back(event("response.function_call_arguments.done",
                            {{"item_id", call_item_["id"]},
                             {"output_index", output_index_},
                             {"name", call_item_["name"]},
                             {"arguments", text_}}));
        out.push_back(event("response.output_item.done",
                            {{"output_index", output_index_}, {"item", call_item_}}));
    }
    open_.clear();
    text_.clear();
}

std::vector<ResponsesEvent> ResponsesStream::events(const std::vector<ChoiceEvent>& events) {
    std::vector<ResponsesEvent> out;
    for (const auto& ev : events) {
        if (ev.index != 0) continue;
        if (!ev.delta.reasoning.empty()) {
            if (open_ != "reasoning") open(out, "reasoning");
            text_ += ev.delta.reasoning;
            out.push_back(event("response.reasoning_text.delta", {{"item_id", ids_.reasoning},
                                                                  {"output_index", output_index_},
                                                                  {"content_index", 0},
                                                                  {"delta", ev.delta.reasoning}}));
        }
        if (!ev.delta.content.empty()) {
            if (open_ != "message") open(out, "message");
            text_ += ev.delta.content;
            out.push_back(event("response.output_text.delta", {{"item_id", ids_.message},
                                                               {"output_index", output_index_},
                                                               {"content_index", 0},
                                                               {"delta", ev.delta.content},
                                                               {"logprobs", json::array()}}));
        }
        for (const auto& c : ev.delta.tool_calls) {
            if (c.index > 0 && !job_.parallel_tool_calls) continue;
            if (open_ != "function_call" || c.index != call_) {
                close(out); // before call_item_ changes: it closes the previous call
                while (int(ids_.calls.size()) <= c.index)
                    ids_.calls.push_back("fc_" + random_hex(24));
                call_item_ = {{"type", "function_call"},
                              {"id", ids_.calls[size_t(c.index)]},
                              {"call_id", c.id},
                              {"name", c.name},
                              {"arguments", ""},
                              {"status", "in_progress"}};
                call_ = c.index;
                open(out, "function_call");
            }
            if (!c.arguments.empty()) {
                text_ += c.arguments;
                out.push_back(event("response.function_call_arguments.delta",
                                    {{"item_id", call_item_["id"]},
                                     {"output_index", output_index_},
                                     {"delta", c.arguments}}));
            }
        }
    }
    return out;
}

std::vector<ResponsesEvent> ResponsesStream::finish(const Generation& g) {
    std::vector<ResponsesEvent> out;
    const ChoiceResult& r = g.result(0);
    if (ids_.message.empty() && r.tool_calls.empty()) open(out, "message"); // an empty answer
    close(out);
    const json final = responses_object(echo_, &g, job_, ids_, false);
    final_ = final;
    const bool complete = final["status"] == "completed";
    out.push_back(event(complete ? "response.completed" : "response.incomplete",
                        {{"response", final}}));
    return out;
}

ResponsesEvent ResponsesStream::error(int status, const std::string& message,
                                      const std::string& param) {
    return event("error", {{"code", status == 400 ? "invalid_request_error" : "server_error"},
                           {"message", message},
                           {"param", param.empty() ? json() : json(param)}});
}

} // namespace ninfer::server
