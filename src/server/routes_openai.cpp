// POST /v1/chat/completions and /v1/completions.
#include <ctime>

#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/server_state.h"
#include "server/warm_turn.h"

namespace ninfer::server {
namespace {

std::function<void(int, double)> itl_recorder(ServerState& s) {
    Metrics* m = &s.metrics;
    return [m](int tokens, double gap) {
        if (gap >= 0) m->inter_token(tokens, gap);
    };
}

ResponseMeta meta_for(ServerState& s, const char* prefix) {
    ResponseMeta meta{prefix + random_hex(24), int64_t(std::time(nullptr)), s.model.names[0]};
    RequestRecord& rec = current_record();
    rec.id = meta.id;
    rec.model = meta.model;
    return meta;
}

std::shared_ptr<SseJob> openai_sse(std::shared_ptr<Generation> g,
                                   std::shared_ptr<Admission> admission,
                                   std::shared_ptr<OpenAIStream> stream,
                                   const std::vector<std::string>& echo) {
    auto job = std::make_shared<SseJob>();
    job->generation = std::move(g);
    job->admission = std::move(admission);
    for (const auto& c : stream->start(echo)) job->opening.push_back(sse_data(c));
    job->frames = [stream](const std::vector<ChoiceEvent>& events) {
        std::vector<std::string> out;
        for (const auto& c : stream->events(events)) out.push_back(sse_data(c));
        return out;
    };
    job->finish = [stream](const Generation& gen) {
        std::vector<std::string> out;
        const nlohmann::ordered_json usage = stream->usage_chunk(gen);
        if (!usage.is_null()) out.push_back(sse_data(usage));
        out.push_back("data: [DONE]\n\n");
        return out;
    };
    job->error = [](const ApiError& e) {
        return sse_data(error_body(ApiStyle::OpenAI, e)) + "data: [DONE]\n\n";
    };
    job->keepalive = ": keep-alive\n\n";
    return job;
}

void chat(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    ChatJob job = parse_openai_chat(body);
    const ResponseMeta meta = meta_for(s, "chatcmpl-");
    RequestRecord& rec = current_record();
    rec.stream = job.gen.stream;
    rec.n = job.gen.n;
    auto admission = std::make_shared<Admission>(s, job.gen.n);
    PreparedChat p = prepare_chat(s.model, job, "call_" + random_hex(8) + "_");
    if (s.options.log_content) rec.content["prompt"] = p.prompt_text;
    auto g = std::make_shared<Generation>(*s.model.engine, *s.model.tokenizer, std::move(p.spec),
                                          itl_recorder(s));
    if (!job.gen.stream) {
        ConnectionProbe probe = probe_of(req);
        wait_generation(s, *g, probe);
        set_json(res, openai_chat_response(meta, *g, job, *s.model.tokenizer));
        if (s.options.warm_next_turn) warm_next_turn(s.model, job, *g);
        return;
    }
    auto stream = std::make_shared<OpenAIStream>(meta, true, job.gen, job.parallel_tool_calls,
                                                 *s.model.tokenizer, g->choices());
    auto sse = openai_sse(g, admission, stream, {});
    if (s.options.warm_next_turn) sse->done = next_turn_warmer(s.model, job);
    send_sse(s, req, res, sse);
}

void completion(ServerState& s, const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    check_model(s.model, body, ApiStyle::OpenAI);
    CompletionJob job = parse_openai_completion(body);
    const ResponseMeta meta = meta_for(s, "cmpl-");
    RequestRecord& rec = current_record();
    rec.stream = job.gen.stream;
    const int prompts = int(job.prompts.size() + job.prompt_ids.size());
    rec.n = prompts * job.gen.n;
    auto admission = std::make_shared<Admission>(s, rec.n);
    PreparedCompletion p = prepare_completion(s.model, job);
    if (s.options.log_content) rec.content["prompt"] = p.prompt_texts;
    auto g = std::make_shared<Generation>(*s.model.engine, *s.model.tokenizer, std::move(p.spec),
                                          itl_recorder(s));
    if (!job.gen.stream) {
        ConnectionProbe probe = probe_of(req);
        wait_generation(s, *g, probe);
        set_json(res,
                 openai_completion_response(meta, *g, job, p.prompt_texts, *s.model.tokenizer));
        return;
    }
    auto stream = std::make_shared<OpenAIStream>(meta, false, job.gen, true, *s.model.tokenizer,
                                                 g->choices());
    std::vector<std::string> echo;
    if (job.echo)
        for (const auto& t : p.prompt_texts)
            for (int i = 0; i < job.gen.n; ++i) echo.push_back(t);
    send_sse(s, req, res, openai_sse(g, admission, stream, echo));
}

} // namespace

void add_openai_routes(httplib::Server& http, ServerState& s) {
    ServerState* state = &s;
    http.Post("/v1/chat/completions", [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res, [&] { chat(*state, req, res); });
    });
    http.Post("/v1/completions", [state](const httplib::Request& req, httplib::Response& res) {
        guarded(*state, ApiStyle::OpenAI, req, res, [&] { completion(*state, req, res); });
    });
}

} // namespace ninfer::server
