// POST /v1/messages and /v1/messages/count_tokens.
#include "server/anthropic_api.h"
#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/server_state.h"
#include "server/warm_turn.h"

namespace ninfer::server {
namespace {

void messages(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::Anthropic);
    ChatJob job = parse_anthropic(body, false);
    const std::string id = "msg_" + random_hex(24);
    RequestRecord& rec = current_record();
    rec.id = id;
    rec.model = s.model.names[0];
    rec.stream = job.gen.stream;
    rec.n = 1;
    auto admission = std::make_shared<Admission>(s, 1);
    PreparedChat p = prepare_chat(s.model, job, "toolu_" + random_hex(8) + "_");
    if (s.options.log_content) rec.content["prompt"] = p.prompt_text;
    const int input_tokens = int(p.spec.prompts[0].size());
    Metrics* metrics = &s.metrics;
    auto g = std::make_shared<Generation>(*s.model.engine, *s.model.tokenizer, std::move(p.spec),
                                          [metrics](int n, double gap) {
                                              if (gap >= 0) metrics->inter_token(n, gap);
                                          });
    if (!job.gen.stream) {
        ConnectionProbe probe = probe_of(req);
        wait_generation(s, *g, probe);
        set_json(res, anthropic_response(id, s.model.names[0], *g, job));
        if (s.options.warm_next_turn) warm_next_turn(s.model, job, *g);
        return;
    }
    auto stream = std::make_shared<AnthropicStream>(id, s.model.names[0], job.parallel_tool_calls);
    auto sse = std::make_shared<SseJob>();
    sse->generation = g;
    sse->admission = admission;
    stream_named_events(*sse, stream, stream->start(input_tokens));
    sse->error = [](const ApiError& e) {
        return sse_event("error", error_body(ApiStyle::Anthropic, e));
    };
    sse->keepalive = sse_event("ping", {{"type", "ping"}});
    if (s.options.warm_next_turn) sse->done = next_turn_warmer(s.model, job);
    send_sse(s, req, res, sse);
}

void count_tokens(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::Anthropic);
    const ChatJob job = parse_anthropic(body, true);
    const std::string prompt = render_chat(s.model, job);
    std::vector<int32_t> ids = s.model.tokenizer->encode(prompt, true);
    if (const std::vector<MediaRef> refs = collect_media(job.messages); !refs.empty()) {
        LoadedMedia media = load_media(s.model, refs); // images count as their placeholders
        lay_out_media(s.model.engine->model_info(), *s.model.tokenizer, ids, media);
    }
    const int n = int(ids.size());
    current_record().prompt_tokens = n;
    set_json(res, {{"input_tokens", n}});
}

} // namespace

void add_anthropic_routes(httplib::Server& http, ServerState& s) {
    ServerState* state = &s;
    http.Post("/v1/messages", [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::Anthropic, req, res, [&] { messages(*state, req, res); });
    });
    http.Post(
        "/v1/messages/count_tokens", [state](const httplib::Request& req, httplib::Response& res) {
            guarded(*state, ApiStyle::Anthropic, req, res, [&] { count_tokens(*state, req, res); });
        });
}

} // namespace ninfer::server
