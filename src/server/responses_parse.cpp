// Responses API request bodies into the equivalent chat completions bodies.
#include "server/api_error.h"
#include "server/openai_api.h"
#include "server/request_fields.h"
#include "server/responses_api.h"

namespace ninfer::server {
namespace {

// The text of a content value: a string, or input_text / output_text / text parts.
std::string content_text(const Json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) bad_param("input", where + ".content must be a string or an array");
    std::string text;
    for (const auto& part : content) {
        if (!part.is_object()) bad_param("input", where + ": a content part must be an object");
        const std::string type = opt_string(part, "type").value_or("");
        if (type == "input_text" || type == "output_text" || type == "text") {
            text += req_string(part, "text");
        } else if (type == "refusal") {
            text += opt_string(part, "refusal").value_or("");
        } else {
            bad_param("input", where + ": content parts of type '" + type +
                                   "' are not supported (input_text, output_text)");
        }
    }
    return text;
}

// A user message's content: its text, or with input_image parts the chat completions parts
// (text and image_url), which parse_openai_chat normalises.
Json user_content(const Json& content, const std::string& where) {
    if (!content.is_array()) return content_text(content, where);
    Json parts = Json::array();
    bool images = false;
    for (const auto& part : content) {
        if (part.is_object() && opt_string(part, "type").value_or("") == "input_image") {
            images = true;
            Json m = openai_media_part(part, where, "input");
            parts.push_back({{"type", "image_url"}, {"image_url", {{"url", m["url"]}}}});
        } else {
            parts.push_back({{"type", "text"}, {"text", content_text(Json::array({part}), where)}});
        }
    }
    return images ? parts : Json(content_text(content, where));
}

// The reasoning text of a reasoning item (its content, else its summary).
std::string reasoning_text(const Json& item) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
        if (const Json* parts = field(item, key); parts && parts->is_array())
            for (const auto& p : *parts)
                if (p.is_object() && p.contains("text") && p["text"].is_string())
                    text += p["text"].get<std::string>();
        if (!text.empty()) break;
    }
    return text;
}

// The assistant message that function calls and reasoning attach to: the last message when it
// is an assistant's, else a new one.
Json& assistant_tail(Json& messages) {
    if (messages.empty() || messages.back()["role"] != "assistant")
        messages.push_back({{"role", "assistant"}, {"content", ""}});
    return messages.back();
}

void add_item(const Json& item, const std::string& where, Json& messages, std::string& reasoning) {
    if (!item.is_object()) bad_param("input", where + " must be an object");
    const std::string type =
        opt_string(item, "type").value_or(field(item, "role") ? "message" : "");
    if (type == "message") {
        std::string role = req_string(item, "role");
        if (role != "user" && role != "system" && role != "developer" && role != "assistant")
            bad_param("input", where + ": role must be user, system, developer or assistant");
        const Json* content = field(item, "content");
        if (!content) bad_param("input", where + ".content is required");
        Json msg = {{"role", role}, {"content", role == "user" ? user_content(*content, where)
                                                               : Json(content_text(*content, where))}};
        if (role == "assistant" && !reasoning.empty()) {
            msg["reasoning_content"] = reasoning;
            reasoning.clear();
        }
        messages.push_back(msg);
    } else if (type == "function_call") {
        Json& msg = assistant_tail(messages);
        if (!reasoning.empty()) {
            msg["reasoning_content"] = reasoning;
            reasoning.clear();
        }
        const std::string args = opt_string(item, "arguments").value_or("{}");
        Json parsed;
        try {
            parsed = Json::parse(args);
        } catch (const Json::exception&) {
            bad_param("input", where + ".arguments must be a JSON object text");
        }
        if (!parsed.is_object()) bad_param("input", where + ".arguments must be a JSON object");
        if (!msg.contains("tool_calls")) msg["tool_calls"] = Json::array();
        msg["tool_calls"].push_back({{"id", req_string(item, "call_id")},
                                     {"type", "function"},
                                     {"function", {{"name", req_string(item, "name")},
                                                   {"arguments", args}}}});
    } else if (type == "function_call_output") {
        const Json* out = field(item, "output");
        messages.push_back({{"role", "tool"},
                            {"tool_call_id", req_string(item, "call_id")},
                            {"content", out ? content_text(*out, where + ".output") : ""}});
    } else if (type == "reasoning") {
        reasoning += reasoning_text(item);
    } else if (type == "item_reference") {
        bad_param("input", where + ": item references are not supported: send the item itself, "
                                   "or continue a stored response with previous_response_id");
    } else {
        bad_param("input", where + ": items of type '" + type +
                               "' are not supported (message, function_call, "
                               "function_call_output, reasoning)");
    }
}

Json to_messages(const Json& b) {
    Json messages = Json::array();
    if (auto instructions = opt_string(b, "instructions"); instructions && !instructions->empty())
        messages.push_back({{"role", "system"}, {"content", *instructions}});
    const Json* input = field(b, "input");
    if (!input) bad_param("input", "'input' is required");
    if (input->is_string()) {
        messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
        return messages;
    }
    if (!input->is_array() || input->empty())
        bad_param("input", "'input' must be a string or a non-empty array of items");
    std::string reasoning; // a reasoning item's text, for the assistant message after it
    for (size_t i = 0; i < input->size(); ++i)
        within("input", [&] {
            add_item((*input)[i], "input[" + std::to_string(i) + "]", messages, reasoning);
        });
    return messages;
}

Json to_tools(const Json& tools) {
    if (!tools.is_array()) bad_param("tools", "'tools' must be an array");
    Json out = Json::array();
    for (const auto& t : tools) {
        if (!t.is_object()) bad_param("tools", "a tool must be an object");
        const std::string type = opt_string(t, "type").value_or("");
        if (type != "function")
            bad_param("tools", "tools of type '" + type + "' are not supported (function only)");
        Json f = {{"name", req_string(t, "name")}};
        for (const char* key : {"description", "parameters", "strict"})
            if (const Json* v = field(t, key)) f[key] = *v;
        out.push_back({{"type", "function"}, {"function", f}});
    }
    return out;
}

Json to_tool_choice(const Json& tc) {
    if (tc.is_string()) return tc;
    if (!tc.is_object()) bad_param("tool_choice", "'tool_choice' must be a string or an object");
    const std::string type = req_string(tc, "type");
    if (type != "function")
        bad_param("tool_choice", "tool_choice type must be function (or auto, none, required)");
    return {{"type", "function"}, {"function", {{"name", req_string(tc, "name")}}}};
}

Json to_response_format(const Json& text) {
    const Json* format = field(text, "format");
    if (!format) return Json();
    if (!format->is_object()) bad_param("text.format", "'text.format' must be an object");
    const std::string type = req_string(*format, "type");
    if (type == "text" || type == "json_object") return {{"type", type}};
    if (type != "json_schema")
        bad_param("text.format", "text.format type must be text, json_object or json_schema");
    Json js = {{"name", opt_string(*format, "name").value_or("response")}};
    const Json* schema = field(*format, "schema");
    if (!schema) bad_param("text.format", "a json_schema format needs 'schema'");
    js["schema"] = *schema;
    if (const Json* strict = field(*format, "strict")) js["strict"] = *strict;
    return {{"type", "json_schema"}, {"json_schema", js}};
}

// Chat parameter names back into the Responses fields they came from.
std::string responses_param(const std::string& chat_param) {
    static const std::vector<std::pair<std::string, std::string>> names = {
        {"messages", "input"},
        {"max_completion_tokens", "max_output_tokens"},
        {"response_format", "text.format"},
        {"reasoning_effort", "reasoning.effort"}};
    for (const auto& [chat, responses] : names)
        if (chat_param == chat || chat_param.rfind(chat + ".", 0) == 0)
            return responses + chat_param.substr(chat.size());
    return chat_param;
}

} // namespace

Json responses_to_chat(const Json& b) {
    for (const char* key : {"previous_response_id", "conversation"})
        if (field(b, key))
            bad_param(key, std::string("'") + key +
                               "' needs stored responses; this server is stateless: send the "
                               "whole conversation as 'input' items");
    reject_field(b, "background", "background responses are not supported");
    reject_field(b, "prompt", "stored prompt templates are not supported");
    Json chat = {{"messages", to_messages(b)}};
    // Fields of the same name and meaning, and the extensions the chat API takes.
    for (const char* key : {"model", "temperature", "top_p", "stream", "parallel_tool_calls",
                            "top_k", "min_p", "seed", "repetition_penalty", "presence_penalty",
                            "frequency_penalty", "stop", "priority", "chat_template_kwargs",
                            "ignore_eos"})
        if (const Json* v = field(b, key)) chat[key] = *v;
    if (const Json* v = field(b, "top_logprobs"); v && !(v->is_number() && *v == 0))
        bad_param("top_logprobs", "'top_logprobs' is not supported here: use /v1/chat/completions");
    if (const Json* v = field(b, "max_output_tokens")) chat["max_completion_tokens"] = *v;
    if (const Json* t = field(b, "tools")) chat["tools"] = within("tools", [&] { return to_tools(*t); });
    if (const Json* tc = field(b, "tool_choice"))
        chat["tool_choice"] = within("tool_choice", [&] { return to_tool_choice(*tc); });
    if (const Json* text = field(b, "text")) {
        if (!text->is_object()) bad_param("text", "'text' must be an object");
        const Json rf = to_response_format(*text);
        if (!rf.is_null()) chat["response_format"] = rf;
    }
    if (const Json* r = field(b, "reasoning")) {
        if (!r->is_object()) bad_param("reasoning", "'reasoning' must be an object");
        if (auto effort = opt_string(*r, "effort")) chat["reasoning_effort"] = *effort;
    }
    return chat;
}

ChatJob parse_responses(const Json& body) {
    const Json chat = responses_to_chat(body);
    try {
        ChatJob job = parse_openai_chat(chat);
        if (job.gen.stream) job.gen.include_usage = true;
        return job;
    } catch (const ApiError& e) {
        if (e.param().empty()) throw;
        throw ApiError(e.status(), e.what(), responses_param(e.param()), e.code());
    }
}

} // namespace ninfer::server
