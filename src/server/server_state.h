// Internal to src/server: the state every handler shares, admission control, the per-request
// log record, and the loops that drive a generation to a plain or an SSE response.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/connection.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/response_store.h"
#include "server/server.h"

namespace ninfer::server {

struct ServerState {
    ModelContext model;
    ServerOptions options;
    Metrics metrics;
    std::atomic<int64_t> in_flight{0}; // admitted sequences
    int64_t capacity = 0;              // the engine's state slots + max_queue
    std::atomic<bool> draining{false}; // shutting down: no new generations
    std::atomic<bool> cancel_all{false};
    std::unique_ptr<ResponseStore> responses; // made from options.responses_store
};

// What the request log line of the current request says; handlers fill it on their thread
// (cpp-httplib runs a request's handler, its stream and its logger on one thread).
struct RequestRecord {
    std::string id;
    std::string model;
    bool stream = false;
    int n = 0;
    int prompt_tokens = -1, completion_tokens = -1;
    int cached_tokens = -1; // of prompt_tokens, served from the prefix cache
    double ttft_s = -1;
    int64_t spec_drafted = 0, spec_accepted = 0, spec_rounds = 0; // speculative decoding
    std::string finish;
    std::string error;
    nlohmann::ordered_json content; // --log-content: prompt and outputs
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};
RequestRecord& current_record();

// Holds `sequences` of the server's capacity for a generation's life: 503 while draining, 429
// when full.
class Admission {
public:
    Admission(ServerState& state, int sequences);
    ~Admission();
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

private:
    ServerState& state_;
    int sequences_;
};

ConnectionProbe probe_of(const httplib::Request& req);

// Runs `g` to the end on this thread, cancelling it when the client goes away or the server
// stops. Throws ApiError: 500 when a choice failed, 503 when the shutdown cancelled it.
void wait_generation(ServerState& s, Generation& g, ConnectionProbe& probe);

// Updates the metrics and the log record once a generation ended.
void record_generation(ServerState& s, const Generation& g);

// SSE: `frames` turns events into SSE text; `finish` gives the closing frames; `error` an error
// frame. Runs on the stream's thread until the generation ends or the client is gone.
struct SseJob {
    std::shared_ptr<Generation> generation;
    std::shared_ptr<Admission> admission;
    std::vector<std::string> opening; // frames sent before the first token
    std::function<std::vector<std::string>(const std::vector<ChoiceEvent>&)> frames;
    std::function<std::vector<std::string>(const Generation&)> finish;
    std::function<std::string(const ApiError&)> error;
    std::string keepalive; // frame sent when nothing was written for keepalive_s
    // After a stream that ended normally and reached the client: next-turn warming, storing a
    // response (null: none).
    std::function<void(const Generation&)> done;
};
void send_sse(ServerState& s, const httplib::Request& req, httplib::Response& res,
              std::shared_ptr<SseJob> job);

std::string sse_data(const nlohmann::ordered_json& data);
std::string sse_event(const std::string& event, const nlohmann::ordered_json& data);

// Named-event streams (Anthropic messages, Responses): `opening` first, then the frames and the
// end of a stream object whose events(events) and finish(generation) return (event name, data)
// pairs.
template <class Stream>
void stream_named_events(
    SseJob& sse, std::shared_ptr<Stream> stream,
    const std::vector<std::pair<std::string, nlohmann::ordered_json>>& opening) {
    auto frames = [](const std::vector<std::pair<std::string, nlohmann::ordered_json>>& events) {
        std::vector<std::string> out;
        for (const auto& [event, data] : events) out.push_back(sse_event(event, data));
        return out;
    };
    sse.opening = frames(opening);
    sse.frames = [stream, frames](const std::vector<ChoiceEvent>& events) {
        return frames(stream->events(events));
    };
    sse.finish = [stream, frames](const Generation& gen) { return frames(stream->finish(gen)); };
}

// Sets an error response in the API's shape.
void set_error(httplib::Response& res, ApiStyle style, const ApiError& e);
void set_json(httplib::Response& res, const nlohmann::ordered_json& body);

// Route registration (routes_*.cpp).
void add_openai_routes(httplib::Server& http, ServerState& s);
void add_anthropic_routes(httplib::Server& http, ServerState& s);
void add_responses_routes(httplib::Server& http, ServerState& s);
void add_misc_routes(httplib::Server& http, ServerState& s);

// Runs a handler body after the API key check (401), turning exceptions into error responses
// in `style`. (The check runs here, after cpp-httplib read the body: a pre-routing rejection
// would leave the body unread on a keep-alive connection.)
void guarded(ServerState& s, ApiStyle style, const httplib::Request& req, httplib::Response& res,
             const std::function<void()>& body);

// The OpenAPI 3.1 description served at /openapi.json (openapi.json, embedded at build time).
const char* openapi_document();

} // namespace ninfer::server
