// OpenAI request bodies into jobs.
#include <algorithm>

#include "server/api_error.h"
#include "server/openai_api.h"
#include "server/sampling_fields.h"

namespace ninfer::server {
namespace {

constexpr int kMaxChoices = 16;
constexpr int kMaxTopLogprobs = 20;
constexpr size_t kMaxStops = 16;

void parse_gen_options(const Json& b, GenOptions& g, bool chat) {
    SamplingParams& s = g.sampling;
    s.temperature = opt_number(b, "temperature", 0, 2);
    s.top_p = opt_number(b, "top_p", 0, 1);
    if (s.top_p && float(*s.top_p) <= 0) // the sampler takes a float
        bad_param("top_p", "'top_p' must be in (0, 1]");
    if (auto k = opt_int(b, "top_k", -1, 1 << 30)) s.top_k = *k < 0 ? 0 : *k; // -1: off (vLLM)
    s.min_p = opt_number(b, "min_p", 0, 1);
    s.presence_penalty = opt_number(b, "presence_penalty", -2, 2);
    s.frequency_penalty = opt_number(b, "frequency_penalty", -2, 2);
    s.repetition_penalty = opt_number(b, "repetition_penalty", 1e-6, 100);
    if (auto seed = opt_int(b, "seed", INT64_MIN, INT64_MAX)) s.seed = uint64_t(*seed);
    g.stop = string_list(b, "stop", kMaxStops);
    std::erase(g.stop, std::string());
    g.stop_token_ids = token_id_list(b, "stop_token_ids", /*non_empty=*/false);
    g.ignore_eos = opt_bool(b, "ignore_eos").value_or(false);
    g.priority = parse_priority(b);
    g.n = int(opt_int(b, "n", 1, kMaxChoices).value_or(1));
    const int64_t min_tokens = chat ? 1 : 0;
    g.max_tokens = opt_int(b, "max_tokens", min_tokens, INT32_MAX);
    if (chat)
        if (auto m = opt_int(b, "max_completion_tokens", 1, INT32_MAX)) g.max_tokens = m;
    g.stream = opt_bool(b, "stream").value_or(false);
    if (const Json* so = field(b, "stream_options")) {
        if (!so->is_object()) bad_param("stream_options", "'stream_options' must be an object");
        if (!g.stream) bad_param("stream_options", "'stream_options' needs 'stream': true");
        g.include_usage = within("stream_options",
                                 [&] { return opt_bool(*so, "include_usage").value_or(false); });
    }
    parse_sampling_extras(b, g);
}

Json parse_tool_call(const Json& call) {
    if (!call.is_object()) bad_param("messages", "a tool call must be an object");
    const Json* fn = field(call, "function");
    if (!fn || !fn->is_object()) bad_param("messages", "a tool call needs a 'function' object");
    Json out = {{"id", opt_string(call, "id").value_or("")},
                {"type", "function"},
                {"function", {{"name", req_string(*fn, "name")}}}};
    Json args = Json::object();
    if (const Json* a = field(*fn, "arguments")) {
        if (a->is_string()) {
            if (json_deeper_than(a->get<std::string>(), kMaxJsonDepth))
                bad_param("messages", "tool call arguments nest too deeply");
            args = Json::parse(a->get<std::string>(), nullptr, false);
            if (args.is_discarded() || !args.is_object())
                bad_param("messages", "tool call arguments must be a JSON object");
        } else if (a->is_object()) {
            args = *a;
        } else {
            bad_param("messages", "tool call arguments must be a JSON object string");
        }
    }
    out["function"]["arguments"] = args;
    return out;
}

Json parse_message(const Json& msg, size_t index) {
    const std::string where = "messages[" + std::to_string(index) + "]";
    if (!msg.is_object()) bad_param("messages", where + " must be an object");
    const std::string role = req_string(msg, "role");
    Json out = Json::object();
    const Json* content = field(msg, "content");
    if (role == "system" || role == "developer" || role == "user" || role == "tool") {
        out["role"] = role == "developer" ? "system" : role;
        out["content"] = content ? (role == "user" ? openai_user_content(*content, where)
                                                   : Json(openai_content_text(*content,
                                                                              where.c_str())))
                                 : Json("");
        if (role == "tool") {
            if (auto id = opt_string(msg, "tool_call_id")) out["tool_call_id"] = *id;
        }
    } else if (role == "assistant") {
        out["role"] = "assistant";
        out["content"] = content ? openai_content_text(*content, where.c_str()) : "";
        if (auto r = opt_string(msg, "reasoning_content"))
            out["reasoning_content"] = *r;
        else if (auto r2 = opt_string(msg, "reasoning"))
            out["reasoning_content"] = *r2;
        if (const Json* calls = field(msg, "tool_calls")) {
            if (!calls->is_array()) bad_param("messages", where + ".tool_calls must be an array");
            Json list = Json::array();
            for (const auto& c : *calls) list.push_back(parse_tool_call(c));
            if (!list.empty()) out["tool_calls"] = list;
        }
        reject_field(msg, "function_call", "use tool_calls");
        reject_field(msg, "audio", "audio output is not supported");
    } else {
        bad_param("messages", where + ": role '" + role +
                                  "' is not supported (system, developer, user, assistant, tool)");
    }
    return out;
}

Json parse_tools(const Json& b) {
    const Json* tools = field(b, "tools");
    if (!tools) return Json();
    if (!tools->is_array()) bad_param("tools", "'tools' must be an array");
    Json out = Json::array();
    for (const auto& t : *tools) {
        if (!t.is_object() || opt_string(t, "type").value_or("") != "function")
            bad_param("tools", "only tools of type 'function' are supported");
        const Json* fn = field(t, "function");
        if (!fn || !fn->is_object()) bad_param("tools", "a tool needs a 'function' object");
        const std::string name = req_string(*fn, "name");
        if (name.empty() || name.find_first_of("<>\n") != std::string::npos)
            bad_param("tools", "invalid tool name '" + name + "'");
        Json f = {{"name", name}};
        if (auto d = opt_string(*fn, "description")) f["description"] = *d;
        if (const Json* p = field(*fn, "parameters")) {
            if (!p->is_object()) bad_param("tools", "tool parameters must be a JSON schema object");
            f["parameters"] = *p;
        }
        out.push_back({{"type", "function"}, {"function", f}});
    }
    return out.empty() ? Json() : out;
}

ToolChoice parse_tool_choice(const Json& b, const Json& tools) {
    ToolChoice tc;
    const Json* v = field(b, "tool_choice");
    if (!v) return tc;
    if (v->is_string()) {
        const std::string s = v->get<std::string>();
        if (s == "auto")
            tc.kind = ToolChoice::Kind::Auto;
        else if (s == "none")
            tc.kind = ToolChoice::Kind::None;
        else if (s == "required")
            tc.kind = ToolChoice::Kind::Required;
        else
            bad_param("tool_choice", "'tool_choice' must be none, auto, required or a function");
    } else if (v->is_object() && opt_string(*v, "type").value_or("") == "function") {
        const Json* fn = field(*v, "function");
        if (!fn) bad_param("tool_choice", "'tool_choice' needs a 'function' with a 'name'");
        tc.kind = ToolChoice::Kind::Named;
        tc.name = req_string(*fn, "name");
    } else {
        bad_param("tool_choice", "'tool_choice' must be none, auto, required or a function");
    }
    if (tc.kind == ToolChoice::Kind::Required || tc.kind == ToolChoice::Kind::Named) {
        if (!tools.is_array()) bad_param("tool_choice", "tool_choice needs 'tools'");
        if (tc.kind == ToolChoice::Kind::Named &&
            std::none_of(tools.begin(), tools.end(),
                         [&](const Json& t) { return t["function"]["name"] == tc.name; }))
            bad_param("tool_choice", "tool_choice names '" + tc.name + "', which is not a tool");
    }
    return tc;
}

void parse_response_format(const Json& b, ChatJob& job) {
    const Json* rf = field(b, "response_format");
    if (!rf) return;
    if (!rf->is_object()) bad_param("response_format", "'response_format' must be an object");
    const std::string type = req_string(*rf, "type");
    if (type == "text") return;
    if (type == "json_object") {
        job.format = ChatJob::Format::JsonObject;
        return;
    }
    if (type != "json_schema")
        bad_param("response_format", "response_format type must be text, json_object or "
                                     "json_schema");
    const Json* js = field(*rf, "json_schema");
    if (!js || !js->is_object())
        bad_param("response_format", "json_schema response_format needs a 'json_schema' object");
    const Json* schema = field(*js, "schema");
    if (!schema || !(schema->is_object() || schema->is_boolean()))
        bad_param("response_format", "'json_schema.schema' must be a JSON schema object");
    job.format = ChatJob::Format::JsonSchema;
    job.schema = nlohmann::ordered_json::parse(schema->dump());
}

} // namespace

Json openai_user_content(const Json& content, const std::string& where) {
    if (!content.is_array()) return openai_content_text(content, where.c_str());
    Json parts = Json::array();
    bool has_media = false;
    for (const auto& part : content) {
        Json m = openai_media_part(part, where, "messages");
        if (!m.is_null()) {
            has_media = true;
            parts.push_back(std::move(m));
        } else {
            parts.push_back({{"type", "text"},
                             {"text", openai_content_text(Json::array({part}), where.c_str())}});
        }
    }
    if (!has_media) return openai_content_text(content, where.c_str());
    return parts;
}

std::string openai_content_text(const Json& content, const char* where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        bad_param("messages", std::string(where) + ".content must be a string or an array");
    std::string text;
    for (const auto& part : content) {
        const std::string type = part.is_object() ? opt_string(part, "type").value_or("") : "";
        if (type == "text" && part.contains("text") && part["text"].is_string()) {
            text += part["text"].get<std::string>();
        } else if (type == "image_url" || type == "input_image" || type == "video_url") {
            bad_param("messages", std::string(where) + ": images and videos go in user "
                                                       "messages");
        } else if (type == "input_audio" || type == "file" || type == "image") {
            bad_param("messages", std::string(where) + ": content of type '" + type +
                                      "' is not supported (text, image_url, video_url)");
        } else {
            bad_param("messages", std::string(where) + ": a content part must be "
                                                       "{\"type\": \"text\", \"text\": ...}");
        }
    }
    return text;
}

ChatJob parse_openai_chat(const Json& b) {
    ChatJob job;
    const Json* messages = field(b, "messages");
    if (!messages || !messages->is_array() || messages->empty())
        bad_param("messages", "'messages' must be a non-empty array");
    for (size_t i = 0; i < messages->size(); ++i)
        job.messages.push_back(
            within("messages", [&] { return parse_message((*messages)[i], i); }));
    parse_gen_options(b, job.gen, true);
    job.gen.logprobs = opt_bool(b, "logprobs").value_or(false);
    if (auto k = opt_int(b, "top_logprobs", 0, kMaxTopLogprobs)) {
        if (!job.gen.logprobs && *k > 0)
            bad_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        job.gen.top_logprobs = int(*k);
    }
    job.tools = within("tools", [&] { return parse_tools(b); });
    job.tool_choice = within("tool_choice", [&] { return parse_tool_choice(b, job.tools); });
    job.parallel_tool_calls = opt_bool(b, "parallel_tool_calls").value_or(true);
    within("response_format", [&] { parse_response_format(b, job); });
    parse_vllm_constraints(b, job);
    if (const Json* kw = field(b, "chat_template_kwargs")) {
        if (!kw->is_object()) bad_param("chat_template_kwargs", "must be an object");
        job.template_vars = *kw;
    }
    if (auto effort = opt_string(b, "reasoning_effort")) {
        job.template_vars["reasoning_effort"] = *effort;
        if ((*effort == "none" || *effort == "minimal") &&
            !job.template_vars.contains("enable_thinking"))
            job.template_vars["enable_thinking"] = false;
        if (auto budget = reasoning_effort_budget(*effort)) job.reasoning_budget = *budget;
    }
    job.continue_final = opt_bool(b, "continue_final_message").value_or(false);
    if (job.continue_final && job.messages.back()["role"] != "assistant")
        bad_param("continue_final_message", "the last message must be from the assistant");
    reject_field(b, "audio", "audio output is not supported");
    reject_field(b, "prediction", "predicted outputs are not supported");
    reject_field(b, "web_search_options", "web search is not supported");
    reject_field(b, "functions", "use 'tools'");
    reject_field(b, "function_call", "use 'tool_choice'");
    const auto modalities = string_list(b, "modalities", 4);
    for (const auto& mod : modalities)
        if (mod != "text") bad_param("modalities", "only the 'text' modality is supported");
    return job;
}

CompletionJob parse_openai_completion(const Json& b) {
    CompletionJob job;
    const Json* p = field(b, "prompt");
    if (!p) bad_param("prompt", "'prompt' is required");
    auto ids_of = [](const Json& a) {
        std::vector<int32_t> ids;
        for (const auto& v : a) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
                bad_param("prompt", "token id prompts must hold non-negative integers");
            ids.push_back(int32_t(v.get<int64_t>()));
        }
        return ids;
    };
    if (p->is_string()) {
        job.prompts.push_back(p->get<std::string>());
    } else if (p->is_array() && !p->empty() && (*p)[0].is_string()) {
        job.prompts = string_list(b, "prompt", 64);
    } else if (p->is_array() && !p->empty() && (*p)[0].is_array()) {
        if (p->size() > 64) bad_param("prompt", "at most 64 prompts");
        for (const auto& a : *p) {
            if (!a.is_array()) bad_param("prompt", "mixed prompt types");
            job.prompt_ids.push_back(ids_of(a));
        }
    } else if (p->is_array() && !p->empty()) {
        job.prompt_ids.push_back(ids_of(*p));
    } else {
        bad_param("prompt", "'prompt' must be a string, strings, token ids or lists of them");
    }
    parse_gen_options(b, job.gen, false);
    if (!job.gen.max_tokens) job.gen.max_tokens = 16; // the OpenAI default for completions
    if (auto lp = opt_int(b, "logprobs", 0, kMaxTopLogprobs)) {
        job.gen.logprobs = true;
        job.gen.top_logprobs = int(*lp);
    }
    job.echo = opt_bool(b, "echo").value_or(false);
    if (auto best = opt_int(b, "best_of", 1, kMaxChoices); best && *best != job.gen.n)
        bad_param("best_of", "'best_of' other than n is not supported");
    if (auto suffix = opt_string(b, "suffix"); suffix && !suffix->empty())
        bad_param("suffix", "'suffix' (fill in the middle) is not supported");
    const size_t prompts = job.prompts.size() + job.prompt_ids.size();
    if (prompts * size_t(job.gen.n) > 64) bad_param("n", "at most 64 choices in all");
    return job;
}

} // namespace ninfer::server
