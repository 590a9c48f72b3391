// POST /v1/responses (the Responses API), with its stored responses: previous_response_id, and
// GET / DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items.
#include <ctime>

#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/responses_api.h"
#include "server/server_state.h"
#include "server/warm_turn.h"

namespace ninfer::server {
namespace {

// The request's own input as items: a text input is one user message.
Json input_items(const Json& body) {
    const Json* input = field(body, "input");
    if (!input) return Json::array();
    if (input->is_string()) return Json::array({{{"role", "user"}, {"content", *input}}});
    if (!input->is_array()) bad_param("input", "'input' must be a string or an array of items");
    return *input;
}

// Each item_reference of `items` replaced by the stored item it names (400 when none is);
// whether there was one.
bool resolve_references(ResponseStore& store, Json& items) {
    bool any = false;
    for (size_t i = 0; i < items.size(); ++i) {
        Json& item = items[i];
        if (!item.is_object() || item.value("type", Json()) != "item_reference") continue;
        const Json* id = field(item, "id");
        if (!id || !id->is_string())
            bad_param("input", "input[" + std::to_string(i) + "]: an item_reference needs an id");
        auto target = store.item(id->get<std::string>());
        if (!target)
            bad_param("input", "input[" + std::to_string(i) + "]: no stored item '" +
                                   id->get<std::string>() + "'");
        item = std::move(*target);
        any = true;
    }
    return any;
}

// The body the chat translator parses, and in `chain` the items the generation sees: the
// request's own input (item references resolved), after the conversation of its
// previous_response_id when it names one.
Json continued_body(ServerState& s, const Json& body, Json& chain) {
    const Json* prev = field(body, "previous_response_id");
    chain = input_items(body);
    if (!s.responses->enabled()) return body; // stateless: the translator's 400s
    const bool referenced = resolve_references(*s.responses, chain);
    if (!prev) {
        if (!referenced) return body;
        Json out = body;
        out["input"] = chain;
        return out;
    }
    if (!prev->is_string()) bad_param("previous_response_id", "must be a string");
    const auto entry = s.responses->get(prev->get<std::string>());
    if (!entry)
        throw ApiError(400, "Previous response with id '" + prev->get<std::string>() +
                                "' not found (never stored, deleted, stored with store: false, "
                                "or evicted: --responses-store)",
                       "previous_response_id");
    Json own = std::move(chain);
    chain = entry->conversation();
    for (auto& item : own) chain.push_back(std::move(item));
    Json out = body;
    out.erase("previous_response_id");
    out["input"] = chain;
    return out;
}

void responses(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    Json chain;
    const ChatJob parsed = parse_responses(continued_body(s, body, chain));
    const ChatJob* job = &parsed;
    const bool store = s.responses->enabled() && opt_bool(body, "store").value_or(true);
    ResponseEcho echo{"resp_" + random_hex(24), s.model.names[0], int64_t(std::time(nullptr)),
                      body, store};
    RequestRecord& rec = current_record();
    rec.id = echo.id;
    rec.model = echo.model;
    rec.stream = job->gen.stream;
    rec.n = 1;
    auto admission = std::make_shared<Admission>(s, 1);
    PreparedChat p = prepare_chat(s.model, *job, "call_" + random_hex(8) + "_");
    if (s.options.log_content) rec.content["prompt"] = p.prompt_text;
    Metrics* metrics = &s.metrics;
    auto g = std::make_shared<Generation>(*s.model.engine, *s.model.tokenizer, std::move(p.spec),
                                          [metrics](int n, double gap) {
                                              if (gap >= 0) metrics->inter_token(n, gap);
                                          });
    ResponseStore* kept = store ? s.responses.get() : nullptr;
    const std::string id = echo.id;
    if (!job->gen.stream) {
        ConnectionProbe probe = probe_of(req);
        wait_generation(s, *g, probe);
        ResponseItemIds ids;
        const Json response = responses_object(echo, g.get(), *job, ids, false);
        if (kept) kept->put(id, {chain, response});
        set_json(res, response);
        if (s.options.warm_next_turn) warm_next_turn(s.model, *job, *g);
        return;
    }
    auto stream = std::make_shared<ResponsesStream>(std::move(echo), parsed);
    auto sse = std::make_shared<SseJob>();
    sse->generation = g;
    sse->admission = admission;
    stream_named_events(*sse, stream, stream->start());
    sse->error = [stream](const ApiError& e) {
        const auto [event, data] = stream->error(e.status(), e.what(), e.param());
        return sse_event(event, data);
    };
    sse->keepalive = ": keep-alive\n\n";
    auto warm = s.options.warm_next_turn ? next_turn_warmer(s.model, *job)
                                         : std::function<void(const Generation&)>();
    sse->done = [warm, kept, id, chain, stream](const Generation& done) {
        if (kept) kept->put(id, {chain, stream->final_response()});
        if (warm) warm(done);
    };
    send_sse(s, req, res, sse);
}

// GET /v1/responses/{id}/input_items: the items before the response's output, newest first
// unless order=asc, `limit` (1..100, default 20) after the item `after`. Items without an id
// are named by their response and position.
Json input_items_page(const std::string& id, const Json& items, const httplib::Request& req) {
    const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
    if (order != "asc" && order != "desc") bad_param("order", "'order' must be asc or desc");
    int64_t limit = 20;
    if (req.has_param("limit")) {
        try {
            limit = std::stoll(req.get_param_value("limit"));
        } catch (const std::exception&) {
            limit = 0;
        }
        if (limit < 1 || limit > 100) bad_param("limit", "'limit' must be an integer in 1..100");
    }
    Json all = Json::array();
    for (size_t i = 0; i < items.size(); ++i) {
        Json item = items[i].is_object() ? items[i] : Json{{"content", items[i]}};
        if (!item.contains("id")) item["id"] = id + "_item_" + std::to_string(i);
        if (!item.contains("type") && item.contains("role")) item["type"] = "message";
        all.push_back(std::move(item));
    }
    if (order == "desc") std::reverse(all.begin(), all.end());
    size_t start = 0;
    if (req.has_param("after")) {
        const std::string after = req.get_param_value("after");
        while (start < all.size() && all[start]["id"] != after) ++start;
        if (start == all.size()) bad_param("after", "no item '" + after + "' in this response");
        ++start;
    }
    Json page = Json::array();
    for (size_t i = start; i < all.size() && int64_t(page.size()) < limit; ++i)
        page.push_back(all[i]);
    const bool more = start + page.size() < all.size();
    return {{"object", "list"},
            {"data", page},
            {"first_id", page.empty() ? Json() : page.front()["id"]},
            {"last_id", page.empty() ? Json() : page.back()["id"]},
            {"has_more", more}};
}

ApiError not_stored(const std::string& id) {
    return ApiError(404, "No response with id '" + id + "' is stored", "response_id");
}

ResponseStore::Entry stored(ServerState& s, const std::string& id) {
    auto entry = s.responses->get(id);
    if (!entry) throw not_stored(id);
    return *entry;
}

} // namespace

void add_responses_routes(httplib::Server& http, ServerState& s) {
    ServerState* state = &s;
    http.Post("/v1/responses", [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res, [&] { responses(*state, req, res); });
    });
    const char* one = R"(/v1/responses/([A-Za-z0-9_\-]+))";
    http.Get(one, [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res,
                [&] { set_json(res, stored(*state, req.matches[1]).response); });
    });
    http.Delete(one, [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res, [&] {
            const std::string id = req.matches[1];
            if (!state->responses->erase(id)) throw not_stored(id);
            set_json(res, Json{{"id", id}, {"object", "response"}, {"deleted", true}});
        });
    });
    http.Get(R"(/v1/responses/([A-Za-z0-9_\-]+)/input_items)",
             [state](const httplib::Request& req, httplib::Response& res) {
                 guarded(*state, ApiStyle::OpenAI, req, res, [&] {
                     const std::string id = req.matches[1];
                     set_json(res, input_items_page(id, stored(*state, id).input, req));
                 });
             });
}

} // namespace ninfer::server
