// POST /v1/responses (the stateless Responses API).
#include <ctime>

#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/responses_api.h"
#include "server/server_state.h"
#include "server/warm_turn.h"

namespace ninfer::server {
namespace {

void responses(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    const ChatJob parsed = parse_responses(body);
    const ChatJob* job = &parsed;
    ResponseEcho echo{"resp_" + random_hex(24), s.model.names[0], int64_t(std::time(nullptr)),
                      body};
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
    if (!job->gen.stream) {
        ConnectionProbe probe = probe_of(req);
        wait_generation(s, *g, probe);
        ResponseItemIds ids;
        set_json(res, responses_object(echo, g.get(), *job, ids, false));
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
    if (s.options.warm_next_turn) sse->done = next_turn_warmer(s.model, *job);
    send_sse(s, req, res, sse);
}

} // namespace

void add_responses_routes(httplib::Server& http, ServerState& s) {
    ServerState* state = &s;
    http.Post("/v1/responses", [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res, [&] { responses(*state, req, res); });
    });
}

} // namespace ninfer::server
