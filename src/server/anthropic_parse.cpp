// Anthropic Messages request bodies into chat jobs.
#include "server/anthropic_api.h"
#include <algorithm>

#include "server/api_error.h"
#include "server/media_parts.h"

namespace ninfer::server {
namespace {

std::string block_text(const Json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) bad_param("messages", where + " must be a string or blocks");
    std::string text;
    for (const auto& b : content) {
        if (!b.is_object() || opt_string(b, "type").value_or("") != "text" || !b.contains("text") ||
            !b["text"].is_string())
            bad_param("messages", where + ": only text blocks are supported here");
        text += b["text"].get<std::string>();
    }
    return text;
}

void unsupported_block(const std::string& type, const std::string& where) {
    bad_param("messages", where + ": content blocks of type '" + type +
                              "' are not supported (text, image, thinking, tool_use, tool_result)");
}

// A user message: tool_result blocks become tool messages, text the user message.
void parse_user(const Json& content, const std::string& where, Json& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content.get<std::string>()}});
        return;
    }
    if (!content.is_array()) bad_param("messages", where + ".content must be a string or blocks");
    if (content.empty()) bad_param("messages", where + ".content must not be empty");
    std::string text;
    Json parts = Json::array(); // with images: the user message's content parts
    for (const auto& b : content) {
        const std::string type = b.is_object() ? opt_string(b, "type").value_or("") : "";
        if (type == "text") {
            const std::string t = block_text(Json::array({b}), where);
            text += t;
            parts.push_back({{"type", "text"}, {"text", t}});
        } else if (type == "image") {
            parts.push_back(anthropic_media_part(b, where));
        } else if (type == "tool_result") {
            std::string result;
            if (const Json* c = field(b, "content"))
                result = block_text(*c, where + " tool_result");
            Json msg = {{"role", "tool"}, {"content", result}};
            if (auto id = opt_string(b, "tool_use_id")) msg["tool_call_id"] = *id;
            out.push_back(msg);
        } else {
            unsupported_block(type, where);
        }
    }
    const bool images = std::any_of(parts.begin(), parts.end(),
                                    [](const Json& p) { return p["type"] == "image"; });
    if (images)
        out.push_back({{"role", "user"}, {"content", parts}});
    else if (!text.empty())
        out.push_back({{"role", "user"}, {"content", text}});
}

Json parse_assistant(const Json& content, const std::string& where) {
    Json msg = {{"role", "assistant"}, {"content", ""}};
    if (content.is_string()) {
        msg["content"] = content.get<std::string>();
        return msg;
    }
    if (!content.is_array()) bad_param("messages", where + ".content must be a string or blocks");
    std::string text, reasoning;
    Json calls = Json::array();
    for (const auto& b : content) {
        const std::string type = b.is_object() ? opt_string(b, "type").value_or("") : "";
        if (type == "text") {
            text += block_text(Json::array({b}), where);
        } else if (type == "thinking") {
            reasoning += opt_string(b, "thinking").value_or("");
        } else if (type == "redacted_thinking") {
            continue;
        } else if (type == "tool_use") {
            const Json* input = field(b, "input");
            if (input && !input->is_object())
                bad_param("messages", where + ": tool_use input must be an object");
            calls.push_back({{"id", opt_string(b, "id").value_or("")},
                             {"type", "function"},
                             {"function",
                              {{"name", req_string(b, "name")},
                               {"arguments", input ? *input : Json::object()}}}});
        } else {
            unsupported_block(type, where);
        }
    }
    msg["content"] = text;
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!calls.empty()) msg["tool_calls"] = calls;
    return msg;
}

Json parse_tools(const Json& b) {
    const Json* tools = field(b, "tools");
    if (!tools) return Json();
    if (!tools->is_array()) bad_param("tools", "'tools' must be an array");
    Json out = Json::array();
    for (const auto& t : *tools) {
        if (!t.is_object()) bad_param("tools", "a tool must be an object");
        const std::string type = opt_string(t, "type").value_or("custom");
        if (type != "custom")
            bad_param("tools",
                      "tools of type '" + type + "' are not supported (custom tools only)");
        const std::string name = req_string(t, "name");
        if (name.empty() || name.find_first_of("<>\n") != std::string::npos)
            bad_param("tools", "invalid tool name '" + name + "'");
        const Json* schema = field(t, "input_schema");
        if (!schema || !schema->is_object())
            bad_param("tools", "tool '" + name + "' needs an 'input_schema' object");
        Json f = {{"name", name}};
        if (auto d = opt_string(t, "description")) f["description"] = *d;
        f["parameters"] = *schema;
        out.push_back({{"type", "function"}, {"function", f}});
    }
    return out.empty() ? Json() : out;
}

void parse_tool_choice(const Json& b, ChatJob& job) {
    const Json* tc = field(b, "tool_choice");
    if (!tc) return;
    if (!tc->is_object()) bad_param("tool_choice", "'tool_choice' must be an object");
    const std::string type = req_string(*tc, "type");
    if (type == "auto")
        job.tool_choice.kind = ToolChoice::Kind::Auto;
    else if (type == "any")
        job.tool_choice.kind = ToolChoice::Kind::Required;
    else if (type == "none")
        job.tool_choice.kind = ToolChoice::Kind::None;
    else if (type == "tool") {
        job.tool_choice.kind = ToolChoice::Kind::Named;
        job.tool_choice.name = req_string(*tc, "name");
    } else {
        bad_param("tool_choice", "tool_choice type must be auto, any, tool or none");
    }
    if (opt_bool(*tc, "disable_parallel_tool_use").value_or(false)) job.parallel_tool_calls = false;
    const auto kind = job.tool_choice.kind;
    if (kind == ToolChoice::Kind::Required || kind == ToolChoice::Kind::Named) {
        if (!job.tools.is_array()) bad_param("tool_choice", "tool_choice needs 'tools'");
        bool found = kind == ToolChoice::Kind::Required;
        for (const auto& t : job.tools) found |= t["function"]["name"] == job.tool_choice.name;
        if (!found)
            bad_param("tool_choice",
                      "tool_choice names '" + job.tool_choice.name + "', which is not a tool");
    }
}

void parse_thinking(const Json& b, ChatJob& job) {
    job.template_vars["enable_thinking"] = false; // Anthropic's default: no thinking
    const Json* t = field(b, "thinking");
    if (!t) return;
    if (!t->is_object()) bad_param("thinking", "'thinking' must be an object");
    const std::string type = req_string(*t, "type");
    if (type == "disabled") return;
    if (type != "enabled" && type != "adaptive")
        bad_param("thinking", "thinking type must be enabled, adaptive or disabled");
    job.template_vars["enable_thinking"] = true;
    if (type == "enabled") {
        const auto budget = opt_int(*t, "budget_tokens", 1, INT32_MAX);
        if (!budget) bad_param("thinking", "'thinking.budget_tokens' is required");
        job.reasoning_budget = int(*budget);
    }
}

void parse_output_format(const Json& b, ChatJob& job) {
    const Json* oc = field(b, "output_config");
    if (!oc) return;
    const Json* f = field(*oc, "format");
    if (!f) return;
    if (!f->is_object() || opt_string(*f, "type").value_or("") != "json_schema")
        bad_param("output_config", "output_config.format must be {\"type\": \"json_schema\"}");
    const Json* schema = field(*f, "schema");
    if (!schema || !schema->is_object())
        bad_param("output_config", "output_config.format needs a 'schema' object");
    job.format = ChatJob::Format::JsonSchema;
    job.schema = nlohmann::ordered_json::parse(schema->dump());
}

} // namespace

ChatJob parse_anthropic(const Json& b, bool for_count) {
    ChatJob job;
    if (const Json* sys = field(b, "system")) {
        const std::string text = block_text(*sys, "system");
        if (!text.empty()) job.messages.push_back({{"role", "system"}, {"content", text}});
    }
    const Json* messages = field(b, "messages");
    if (!messages || !messages->is_array() || messages->empty())
        bad_param("messages", "'messages' must be a non-empty array");
    for (size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) bad_param("messages", where + " must be an object");
        const std::string role = req_string(m, "role");
        const Json* content = field(m, "content");
        if (!content) bad_param("messages", where + ".content is required");
        if (role == "user")
            parse_user(*content, where, job.messages);
        else if (role == "assistant")
            job.messages.push_back(parse_assistant(*content, where));
        else
            bad_param("messages", where + ": role must be user or assistant");
    }
    if (job.messages.empty()) bad_param("messages", "the messages hold no content");
    const Json& last = job.messages.back();
    job.continue_final = last["role"] == "assistant" && !last.contains("tool_calls");
    GenOptions& g = job.gen;
    g.max_tokens = opt_int(b, "max_tokens", 0, INT32_MAX);
    if (!g.max_tokens && !for_count) bad_param("max_tokens", "'max_tokens' is required");
    g.sampling.temperature = opt_number(b, "temperature", 0, 2);
    g.sampling.top_p = opt_number(b, "top_p", 0, 1);
    if (g.sampling.top_p && float(*g.sampling.top_p) <= 0)
        bad_param("top_p", "'top_p' must be in (0, 1]"); // the sampler takes a float
    if (auto k = opt_int(b, "top_k", 0, 1 << 30)) g.sampling.top_k = *k;
    if (auto seed = opt_int(b, "seed", INT64_MIN, INT64_MAX)) g.sampling.seed = uint64_t(*seed);
    g.stop = string_list(b, "stop_sequences", 16);
    std::erase(g.stop, std::string());
    g.stream = opt_bool(b, "stream").value_or(false);
    g.priority = parse_priority(b); // an extension, as for OpenAI
    job.tools = parse_tools(b);
    parse_tool_choice(b, job);
    parse_thinking(b, job);
    parse_output_format(b, job);
    reject_field(b, "container", "code execution containers are not supported");
    reject_field(b, "mcp_servers", "MCP servers are not supported");
    return job;
}

} // namespace ninfer::server
