// Driving generations to responses: admission, the wait loop of plain responses, the SSE loop
// (keep-alives, disconnect detection), metrics and the request record.
#include <thread>

#include "server/server_state.h"

namespace ninfer::server {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20); // bounds cancellation latency

const char* finish_name(Finish f) {
    switch (f) {
    case Finish::Stop:
    case Finish::StopString:
        return "stop";
    case Finish::Length:
        return "length";
    case Finish::Cancelled:
        return "cancelled";
    case Finish::Error:
        return "error";
    case Finish::None:
        break;
    }
    return "none";
}

// The first failed choice as an ApiError, if any.
std::optional<ApiError> generation_error(ServerState& s, const Generation& g) {
    for (int i = 0; i < g.choices(); ++i) {
        const ChoiceResult& r = g.result(i);
        if (r.finish == Finish::Error) return ApiError(500, "generation failed: " + r.error);
        if (r.finish == Finish::Cancelled && s.cancel_all)
            return ApiError(503, "the server is shutting down");
    }
    return std::nullopt;
}

} // namespace

RequestRecord& current_record() {
    thread_local RequestRecord record;
    return record;
}

Admission::Admission(ServerState& state, int sequences) : state_(state), sequences_(sequences) {
    if (state_.draining) throw ApiError(503, "the server is shutting down");
    const int64_t before = state_.in_flight.fetch_add(sequences_);
    if (before + sequences_ > state_.capacity && before > 0) {
        state_.in_flight.fetch_sub(sequences_);
        throw ApiError(429, "the server is at capacity (" + std::to_string(state_.capacity) +
                                " sequences running or queued); retry later");
    }
}

Admission::~Admission() {
    state_.in_flight.fetch_sub(sequences_);
}

ConnectionProbe probe_of(const httplib::Request& req) {
    return ConnectionProbe(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
}

void wait_generation(ServerState& s, Generation& g, ConnectionProbe& probe) {
    std::vector<ChoiceEvent> events;
    bool cancelled = false;
    while (g.poll(kPollInterval, events)) {
        events.clear();
        if (!cancelled && (s.cancel_all || probe.closed())) {
            g.cancel();
            cancelled = true;
        }
    }
    record_generation(s, g);
    if (auto e = generation_error(s, g)) throw *e;
}

void record_generation(ServerState& s, const Generation& g) {
    RequestRecord& rec = current_record();
    rec.prompt_tokens = g.prompt_tokens();
    rec.cached_tokens = g.cached_tokens();
    rec.completion_tokens = g.completion_tokens();
    rec.ttft_s = g.ttft_s();
    const SpeculativeStats spec = g.speculative();
    rec.spec_rounds = spec.rounds;
    rec.spec_drafted = spec.drafted;
    rec.spec_accepted = spec.accepted;
    rec.finish.clear();
    for (int i = 0; i < g.choices(); ++i) {
        const ChoiceResult& r = g.result(i);
        const char* name = finish_name(r.finish);
        s.metrics.finished(name);
        if (rec.finish.empty()) rec.finish = name;
        if (r.finish == Finish::Error && rec.error.empty()) rec.error = r.error;
        if (s.options.log_content)
            rec.content["outputs"].push_back({{"reasoning", r.reasoning},
                                              {"content", r.content},
                                              {"tool_calls", r.tool_calls.size()}});
    }
    s.metrics.tokens(g.prompt_tokens(), g.completion_tokens(), rec.cached_tokens);
    if (g.ttft_s() >= 0) s.metrics.ttft(g.ttft_s());
    s.metrics.duration(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - rec.start).count());
}

std::string sse_data(const nlohmann::ordered_json& data) {
    return "data: " + dump_json(data) + "\n\n";
}

std::string sse_event(const std::string& event, const nlohmann::ordered_json& data) {
    return "event: " + event + "\ndata: " + dump_json(data) + "\n\n";
}

void send_sse(ServerState& s, const httplib::Request& req, httplib::Response& res,
              std::shared_ptr<SseJob> job) {
    ServerState* state = &s;
    auto probe = std::make_shared<ConnectionProbe>(probe_of(req));
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state, job, probe](size_t, httplib::DataSink& sink) {
            Generation& g = *job->generation;
            auto last_write = std::chrono::steady_clock::now();
            auto write = [&](const std::string& frame) {
                last_write = std::chrono::steady_clock::now();
                return sink.write(frame.data(), frame.size());
            };
            bool ok = true;
            for (const auto& f : job->opening) ok = ok && write(f);
            std::vector<ChoiceEvent> events;
            bool cancelled = false;
            bool more = true;
            while (more) {
                events.clear();
                more = g.poll(kPollInterval, events);
                if (ok && !events.empty())
                    for (const auto& f : job->frames(events)) ok = ok && write(f);
                const auto idle = std::chrono::steady_clock::now() - last_write;
                if (ok && idle > std::chrono::duration<double>(state->options.keepalive_s))
                    ok = write(job->keepalive);
                if (!cancelled && (!ok || state->cancel_all || probe->closed())) {
                    g.cancel();
                    cancelled = true;
                }
            }
            record_generation(*state, g);
            // The generation holds no engine sequence any more: give its capacity back before
            // the closing frames, so a client's next request never meets its own last one.
            job->admission.reset();
            if (ok) {
                std::optional<ApiError> err;
                for (int i = 0; i < g.choices() && !err; ++i) {
                    const ChoiceResult& r = g.result(i);
                    if (r.finish == Finish::Error)
                        err = ApiError(500, "generation failed: " + r.error);
                    if (r.finish == Finish::Cancelled)
                        err = ApiError(503, "the request was cancelled (server shutting down)");
                }
                if (err) {
                    current_record().error = err->what();
                    ok = write(job->error(*err));
                } else {
                    for (const auto& f : job->finish(g)) ok = ok && write(f);
                }
            }
            if (ok) sink.done();
            if (ok && job->done) job->done(g);
            return ok;
        },
        [job](bool) {
            if (!job->generation->finished()) job->generation->cancel();
        });
}

void set_error(httplib::Response& res, ApiStyle style, const ApiError& e) {
    res.status = e.status();
    res.set_content(dump_json(error_body(style, e)), "application/json");
    current_record().error = e.what();
}

void set_json(httplib::Response& res, const nlohmann::ordered_json& body) {
    res.status = 200;
    res.set_content(dump_json(body), "application/json");
}

namespace {

// Compares without an early exit, so the time taken does not reveal a key's prefix.
bool same_secret(const std::string& a, const std::string& b) {
    if (a.size() != b.size() || b.empty()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i]);
    return diff == 0;
}

bool authorized(const std::vector<std::string>& keys, const httplib::Request& req) {
    if (keys.empty()) return true;
    std::string given = req.get_header_value("x-api-key");
    const std::string auth = req.get_header_value("Authorization");
    if (auth.size() > 7 &&
        (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0))
        given = auth.substr(7);
    bool ok = false;
    for (const auto& k : keys) ok |= same_secret(given, k);
    return ok;
}

} // namespace

void guarded(ServerState& s, ApiStyle style, const httplib::Request& req, httplib::Response& res,
             const std::function<void()>& body) {
    try {
        // chunked bodies are not held to the limit by cpp-httplib (the transport bounds them)
        if (req.body.size() > s.options.max_body_bytes)
            throw ApiError(413, "the request body is larger than the server accepts");
        if (!authorized(s.options.api_keys, req))
            throw ApiError(401,
                           "invalid or missing API key (Authorization: Bearer KEY or "
                           "x-api-key: KEY)",
                           "", "invalid_api_key");
        body();
    } catch (const std::exception& e) {
        set_error(res, style, to_api_error(e));
    }
}

} // namespace ninfer::server
