// Generation results into OpenAI response objects and stream chunks.
#include <algorithm>

#include "server/api_error.h"
#include "server/openai_api.h"
#include "text/unicode.h"

namespace ninfer::server {
namespace {

using json = nlohmann::ordered_json;

// A token's bytes; an id beyond the tokenizer (random weights with a smaller tokenizer) reads
// as U+FFFD, as in the text.
std::string bytes_of(const text::Tokenizer& tok, int32_t id) {
    return id < tok.vocab_size() ? tok.token_bytes(id) : std::string("\xEF\xBF\xBD");
}

json token_entry(const text::Tokenizer& tok, int32_t id, float logprob) {
    const std::string b = bytes_of(tok, id);
    json bytes = json::array();
    for (unsigned char c : b) bytes.push_back(int(c));
    return {{"token", text::utf8_lossy(b)}, {"logprob", logprob}, {"bytes", bytes}};
}

json chat_logprobs(const text::Tokenizer& tok, const std::vector<GeneratedToken>& tokens) {
    json content = json::array();
    for (const auto& t : tokens) {
        json e = token_entry(tok, t.id, t.logprob);
        json top = json::array();
        for (const auto& alt : t.top_logprobs) top.push_back(token_entry(tok, alt.id, alt.logprob));
        e["top_logprobs"] = top;
        content.push_back(e);
    }
    return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(const text::Tokenizer& tok, const std::vector<GeneratedToken>& tokens,
                         size_t& offset) {
    json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    for (const auto& t : tokens) {
        const std::string s = text::utf8_lossy(bytes_of(tok, t.id));
        toks.push_back(s);
        lps.push_back(t.logprob);
        json top = json::object();
        for (const auto& alt : t.top_logprobs)
            top[text::utf8_lossy(bytes_of(tok, alt.id))] = alt.logprob;
        tops.push_back(top);
        offs.push_back(offset);
        offset += s.size();
    }
    return {
        {"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json tool_calls_json(const std::vector<text::ToolCall>& calls, bool parallel) {
    json out = json::array();
    for (const auto& c : calls) {
        out.push_back(json(text::openai_tool_call(c)));
        if (!parallel) break;
    }
    return out;
}

} // namespace

void check_model(const ModelContext& m, const Json& body, ApiStyle style) {
    const auto name = opt_string(body, "model");
    if (!name || name->empty()) return;
    if (std::find(m.names.begin(), m.names.end(), *name) == m.names.end())
        throw ApiError(404,
                       "The model '" + *name + "' does not exist (this server serves '" +
                           m.names[0] + "')",
                       "model", "model_not_found");
}

json openai_usage(const Generation& g) {
    const int prompt = g.prompt_tokens(), completion = g.completion_tokens();
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", g.cached_tokens()}}},
            {"completion_tokens_details", {{"reasoning_tokens", g.reasoning_tokens()}}}};
}

const char* openai_finish(const ChoiceResult& r, bool tool_calls) {
    switch (r.finish) {
    case Finish::Length:
        return "length";
    case Finish::Stop:
        return tool_calls ? "tool_calls" : "stop";
    default:
        return "stop";
    }
}

json openai_chat_response(const ResponseMeta& meta, const Generation& g, const ChatJob& job,
                          const text::Tokenizer& tok) {
    json choices = json::array();
    for (int i = 0; i < g.choices(); ++i) {
        const ChoiceResult& r = g.result(i);
        json msg = {{"role", "assistant"}};
        const json calls = tool_calls_json(r.tool_calls, job.parallel_tool_calls);
        msg["content"] = r.content.empty() && !calls.empty() ? json() : json(r.content);
        if (!r.reasoning.empty()) msg["reasoning_content"] = r.reasoning;
        if (!calls.empty()) msg["tool_calls"] = calls;
        choices.push_back({{"index", i},
                           {"message", msg},
                           {"logprobs", job.gen.logprobs ? chat_logprobs(tok, r.tokens) : json()},
                           {"finish_reason", openai_finish(r, !calls.empty())}});
    }
    return {{"id", meta.id},
            {"object", "chat.completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", choices},
            {"usage", openai_usage(g)},
            {"system_fingerprint", "ninfer"}};
}

json openai_completion_response(const ResponseMeta& meta, const Generation& g,
                                const CompletionJob& job,
                                const std::vector<std::string>& prompt_texts,
                                const text::Tokenizer& tok) {
    json choices = json::array();
    for (int i = 0; i < g.choices(); ++i) {
        const ChoiceResult& r = g.result(i);
        const std::string echo = job.echo ? prompt_texts[size_t(i / job.gen.n)] : "";
        size_t offset = echo.size();
        choices.push_back(
            {{"index", i},
             {"text", echo + r.content},
             {"logprobs", job.gen.logprobs ? completion_logprobs(tok, r.tokens, offset) : json()},
             {"finish_reason", openai_finish(r, false)}});
    }
    json usage = openai_usage(g);
    usage.erase("completion_tokens_details");
    return {{"id", meta.id},
            {"object", "text_completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", choices},
            {"usage", usage},
            {"system_fingerprint", "ninfer"}};
}

OpenAIStream::OpenAIStream(ResponseMeta meta, bool chat, const GenOptions& gen, bool parallel,
                           const text::Tokenizer& tok, int choices)
    : meta_(std::move(meta)), chat_(chat), include_usage_(gen.include_usage), parallel_(parallel),
      tok_(&tok), calls_(size_t(choices), 0), text_offset_(size_t(choices), 0) {}

json OpenAIStream::chunk(json choice) const {
    json c = {{"id", meta_.id},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", meta_.created},
              {"model", meta_.model},
              {"system_fingerprint", "ninfer"},
              {"choices", json::array({std::move(choice)})}};
    if (include_usage_) c["usage"] = nullptr;
    return c;
}

std::vector<json> OpenAIStream::start(const std::vector<std::string>& echo) {
    std::vector<json> out;
    for (size_t i = 0; i < calls_.size(); ++i) {
        if (chat_) {
            out.push_back(chunk({{"index", i},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}));
        } else if (!echo.empty()) {
            const std::string& text = echo[i * echo.size() / calls_.size()];
            text_offset_[i] = text.size();
            out.push_back(chunk(
                {{"index", i}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
        }
    }
    return out;
}

std::vector<json> OpenAIStream::events(const std::vector<ChoiceEvent>& events) {
    std::vector<json> out;
    for (const auto& ev : events) {
        const size_t i = size_t(ev.index);
        json choice = {{"index", ev.index}};
        if (chat_) {
            json delta = json::object();
            if (!ev.delta.reasoning.empty()) delta["reasoning_content"] = ev.delta.reasoning;
            if (!ev.delta.content.empty()) delta["content"] = ev.delta.content;
            json calls = json::array();
            for (const auto& d : ev.delta.tool_calls) {
                if (!parallel_ && d.index > 0) continue;
                if (!calls.empty() && calls.back()["index"] == d.index && d.name.empty()) {
                    calls.back()["function"]["arguments"] =
                        calls.back()["function"]["arguments"].get<std::string>() + d.arguments;
                    continue;
                }
                json c = {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
                if (!d.name.empty()) {
                    c["id"] = d.id;
                    c["type"] = "function";
                    c["function"]["name"] = d.name;
                    calls_[i] = std::max(calls_[i], d.index + 1);
                }
                calls.push_back(c);
            }
            if (!calls.empty()) delta["tool_calls"] = calls;
            choice["delta"] = delta;
            choice["logprobs"] = ev.tokens.empty() ? json() : chat_logprobs(*tok_, ev.tokens);
        } else {
            choice["text"] = ev.delta.content;
            choice["logprobs"] =
                ev.tokens.empty() ? json() : completion_logprobs(*tok_, ev.tokens, text_offset_[i]);
        }
        choice["finish_reason"] = nullptr;
        if (ev.finish != Finish::None) {
            ChoiceResult r;
            r.finish = ev.finish;
            choice["finish_reason"] = openai_finish(r, calls_[i] > 0);
        }
        const bool has_delta = chat_ ? !choice["delta"].empty() : !ev.delta.content.empty();
        if (has_delta || !ev.tokens.empty() || ev.finish != Finish::None)
            out.push_back(chunk(choice));
    }
    return out;
}

json OpenAIStream::usage_chunk(const Generation& g) const {
    if (!include_usage_) return nullptr;
    json usage = openai_usage(g);
    if (!chat_) usage.erase("completion_tokens_details");
    return {{"id", meta_.id},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", meta_.created},
            {"model", meta_.model},
            {"system_fingerprint", "ninfer"},
            {"choices", json::array()},
            {"usage", usage}};
}

} // namespace ninfer::server
