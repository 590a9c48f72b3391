// GET /v1/models, /v1/models/{id}, /health, /metrics, /openapi.json; POST /tokenize,
// /detokenize.
#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/server_state.h"
#include "text/unicode.h"

namespace ninfer::server {
namespace {

using json = nlohmann::ordered_json;

json model_entry(const ServerState& s, const std::string& name, bool anthropic) {
    if (anthropic) {
        char when[32];
        const time_t t = time_t(s.model.created);
        std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
        return {{"type", "model"}, {"id", name}, {"display_name", name}, {"created_at", when}};
    }
    return {{"id", name},
            {"object", "model"},
            {"created", s.model.created},
            {"owned_by", "ninfer"},
            {"max_model_len", s.model.engine->model_info().max_context}};
}

void list_models(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const bool anthropic = req.has_header("anthropic-version");
    json data = json::array();
    for (const auto& name : s.model.names) data.push_back(model_entry(s, name, anthropic));
    if (anthropic)
        set_json(res, {{"data", data},
                       {"has_more", false},
                       {"first_id", s.model.names.front()},
                       {"last_id", s.model.names.back()}});
    else
        set_json(res, {{"object", "list"}, {"data", data}});
}

void get_model(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    for (const auto& n : s.model.names)
        if (n == name) return set_json(res, model_entry(s, n, req.has_header("anthropic-version")));
    throw ApiError(404, "The model '" + name + "' does not exist", "model", "model_not_found");
}

void tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    std::string text;
    if (const Json* messages = field(body, "messages")) {
        Json chat = body;
        chat.erase("prompt");
        chat.erase("max_tokens");
        (void)messages;
        ChatJob job = parse_openai_chat(chat);
        job.add_generation_prompt = opt_bool(body, "add_generation_prompt").value_or(true);
        text = render_chat(s.model, job);
    } else {
        const auto prompt = opt_string(body, "prompt");
        if (!prompt) bad_param("prompt", "give 'prompt' (a string) or 'messages'");
        text = *prompt;
    }
    const std::vector<int32_t> ids = s.model.tokenizer->encode(text, true);
    json out = {{"count", ids.size()},
                {"max_model_len", s.model.engine->model_info().max_context},
                {"tokens", ids}};
    if (opt_bool(body, "return_token_strs").value_or(false)) {
        json strs = json::array();
        for (int32_t id : ids) strs.push_back(text::utf8_lossy(s.model.tokenizer->token_bytes(id)));
        out["token_strs"] = strs;
    }
    set_json(res, out);
}

void detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    const Json* tokens = field(body, "tokens");
    if (!tokens || !tokens->is_array()) bad_param("tokens", "'tokens' must be an array of ids");
    std::vector<int32_t> ids;
    for (const auto& t : *tokens) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
            t.get<int64_t>() >= s.model.tokenizer->vocab_size())
            bad_param("tokens", "'tokens' must hold token ids below " +
                                    std::to_string(s.model.tokenizer->vocab_size()));
        ids.push_back(int32_t(t.get<int64_t>()));
    }
    set_json(res, {{"prompt", s.model.tokenizer->decode(ids)}});
}

void metrics(ServerState& s, const httplib::Request&, httplib::Response& res) {
    const Engine& e = *s.model.engine;
    res.set_content(s.metrics.render(e.stats(), e.memory_stats(), s.in_flight, s.capacity),
                    "text/plain; version=0.0.4; charset=utf-8");
}

void openapi(ServerState&, const httplib::Request&, httplib::Response& res) {
    res.set_content(openapi_document(), "application/json");
}

} // namespace

void add_misc_routes(httplib::Server& http, ServerState& s) {
    ServerState* st = &s;
    auto openai = [st](void (*fn)(ServerState&, const httplib::Request&, httplib::Response&)) {
        return [st, fn](const httplib::Request& req, httplib::Response& res) {
            guarded(*st, ApiStyle::OpenAI, req, res, [&] { fn(*st, req, res); });
        };
    };
    http.Get("/v1/models", openai(list_models));
    http.Get("/v1/models/(.+)", openai(get_model));
    http.Post("/tokenize", openai(tokenize));
    http.Post("/detokenize", openai(detokenize));
    http.Get("/health", [st](const httplib::Request&, httplib::Response& res) {
        if (st->draining) {
            res.status = 503;
            res.set_content(R"({"status":"shutting_down"})", "application/json");
        } else {
            res.set_content(R"({"status":"ok"})", "application/json");
        }
    });
    http.Get("/metrics", openai(metrics));
    http.Get("/openapi.json", openai(openapi));
}

} // namespace ninfer::server
