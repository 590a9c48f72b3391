#include "server/server.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "server/routes_webui.h"
#include "server/server_state.h"
#include "server/transport.h"

namespace ninfer::server {
namespace {

ApiStyle style_of(const std::string& path) {
    return path.rfind("/v1/messages", 0) == 0 ? ApiStyle::Anthropic : ApiStyle::OpenAI;
}

// The endpoint label of a path (metrics, logs); unknown paths share one label.
std::string endpoint_of(const std::string& path) {
    static const char* known[] = {"/",
                                  "/v1/chat/completions",
                                  "/v1/completions",
                                  "/v1/responses",
                                  "/v1/messages",
                                  "/v1/messages/count_tokens",
                                  "/v1/models",
                                  "/tokenize",
                                  "/detokenize",
                                  "/health",
                                  "/metrics",
                                  "/openapi.json"};
    for (const char* k : known)
        if (path == k) return k;
    if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
    if (path.rfind("/v1/responses/", 0) == 0)
        return path.size() > 12 && path.compare(path.size() - 12, 12, "/input_items") == 0
                   ? "/v1/responses/{id}/input_items"
                   : "/v1/responses/{id}";
    return "other";
}

// The methods a known path answers (nullptr: not a route).
const char* allowed_methods(const std::string& path) {
    static const char* posts[] = {"/v1/chat/completions", "/v1/completions",
                                  "/v1/responses",        "/v1/messages",
                                  "/v1/messages/count_tokens", "/tokenize", "/detokenize"};
    static const char* gets[] = {"/v1/models", "/health", "/metrics", "/openapi.json"};
    for (const char* p : posts)
        if (path == p) return "POST";
    for (const char* p : gets)
        if (path == p) return "GET, HEAD";
    if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11) return "GET, HEAD";
    if (path.rfind("/v1/responses/", 0) == 0 && path.size() > 14)
        return endpoint_of(path) == "/v1/responses/{id}" ? "GET, HEAD, DELETE" : "GET, HEAD";
    return nullptr;
}

std::mutex log_mutex;

} // namespace

struct Server::Impl {
    ServerState state;
    HardenedServer http;
    int port = -1;
    std::once_flag shutdown_once;

    void log(const httplib::Request& req, const httplib::Response& res);
    void configure();
};

void Server::Impl::log(const httplib::Request& req, const httplib::Response& res) {
    const std::string endpoint = endpoint_of(req.path);
    state.metrics.request(endpoint, res.status);
    RequestRecord& rec = current_record();
    const bool quiet = (endpoint == "/health" || endpoint == "/metrics") && res.status < 400;
    if (state.options.log_requests && !quiet) {
        nlohmann::ordered_json line = {
            {"time", double(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()) /
                         1000.0},
            {"id", rec.id.empty() ? nullptr : nlohmann::ordered_json(rec.id)},
            {"method", req.method},
            {"endpoint", endpoint},
            {"status", res.status},
            {"duration_s",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - rec.start).count()}};
        if (rec.n > 0) {
            line["model"] = rec.model;
            line["stream"] = rec.stream;
            line["n"] = rec.n;
        }
        if (rec.prompt_tokens >= 0) line["prompt_tokens"] = rec.prompt_tokens;
        if (rec.cached_tokens >= 0) line["cached_tokens"] = rec.cached_tokens;
        if (rec.completion_tokens >= 0) line["completion_tokens"] = rec.completion_tokens;
        if (rec.ttft_s >= 0) line["ttft_s"] = rec.ttft_s;
        if (rec.spec_rounds > 0)
            line["speculative"] = {{"rounds", rec.spec_rounds},
                                   {"drafted", rec.spec_drafted},
                                   {"accepted", rec.spec_accepted}};
        if (!rec.finish.empty()) line["finish_reason"] = rec.finish;
        if (!rec.error.empty()) line["error"] = rec.error;
        if (state.options.log_content && !rec.content.is_null()) line["content"] = rec.content;
        const std::string text = dump_json(line) + "\n";
        std::lock_guard lock(log_mutex);
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
    }
    rec = RequestRecord{};
}

void Server::Impl::configure() {
    const ServerOptions& o = state.options;
    // one thread a connection: + health, metrics, rejections, and idle or slow connections
    // until their keep-alive or read timeouts close them
    const size_t threads = size_t(state.capacity) + 64;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(o.max_body_bytes);
    http.set_limits({double(o.read_timeout_s), 64u << 10, o.max_body_bytes});
    http.set_read_timeout(o.read_timeout_s, 0);
    http.set_write_timeout(10, 0);
    http.set_keep_alive_timeout(o.keep_alive_s);
    http.set_keep_alive_max_count(1000); // requests a connection may carry (cpp-httplib: 5)
    http.set_tcp_nodelay(true);
    http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
        current_record() = RequestRecord{};
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // Errors cpp-httplib itself answers (unknown route 404, body too large 413, bad request
    // line 400...) and those of the transport (408 slow client, 431 headers too large: the
    // connection is then closed) get the API's JSON shape; handler errors already have a body.
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
            if (const TransportFailure f = transport_failure(); f != TransportFailure::None) {
                set_error(res, style_of(req.path),
                          ApiError(transport_status(f), transport_message(f, http.limits())));
                res.set_header("Connection", "close");
                return httplib::Server::HandlerResponse::Handled;
            }
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            // a known route asked with another method (cpp-httplib: 404, or 400 for methods it
            // does not route, such as TRACE, or does not know, such as QUERY: no path then)
            const std::string path =
                req.path.empty() ? req.target.substr(0, req.target.find('?')) : req.path;
            const char* allowed = allowed_methods(path);
            if ((res.status == 404 || res.status == 400) && allowed && !req.method.empty() &&
                std::string_view(allowed).find(req.method) == std::string_view::npos) {
                set_error(res, style_of(path),
                          ApiError(405, "method " + req.method + " is not allowed on " + path +
                                            " (allowed: " + allowed + ")"));
                res.set_header("Allow", allowed);
                return httplib::Server::HandlerResponse::Handled;
            }
            std::string msg = "request failed";
            if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
            if (res.status == 413) msg = "the request body is larger than the server accepts";
            if (res.status == 414) msg = "the request URI is too long";
            if (res.status == 400) {
                // what follows a malformed request on the connection is not a request
                msg = "malformed HTTP request";
                close_after_response();
                res.set_header("Connection", "close");
            }
            set_error(res, style_of(req.path), ApiError(res.status, msg));
            return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                set_error(res, style_of(req.path), to_api_error(e));
            } catch (...) {
                set_error(res, style_of(req.path), ApiError(500, "internal error"));
            }
        });
    http.set_logger(
        [this](const httplib::Request& req, const httplib::Response& res) { log(req, res); });
    add_openai_routes(http, state);
    add_anthropic_routes(http, state);
    add_responses_routes(http, state);
    add_misc_routes(http, state);
    add_webui_routes(http, state);
}

Server::Server(ModelContext model, ServerOptions options) : impl_(std::make_unique<Impl>()) {
    require(model.engine && model.tokenizer && model.chat_template && !model.names.empty(),
            "server: incomplete model context");
    if (options.max_sequences == 0)
        options.max_sequences = int(model.engine->stats().state_slots_total);
    require(options.max_queue >= 0 && options.max_sequences >= 1, "server: bad queue limits (",
            options.max_sequences, " sequences, ", options.max_queue, " queued)");
    impl_->state.model = std::move(model);
    impl_->state.options = std::move(options);
    impl_->state.capacity = impl_->state.options.max_sequences + impl_->state.options.max_queue;
    // Stored responses' JSON: 512 MiB at most (each holds its whole conversation).
    impl_->state.responses =
        std::make_unique<ResponseStore>(impl_->state.options.responses_store, size_t(512) << 20);
    impl_->configure();
}

Server::~Server() {
    shutdown();
}

int Server::bind() {
    const ServerOptions& o = impl_->state.options;
    if (o.port == 0) {
        impl_->port = impl_->http.bind_to_any_port(o.host);
    } else if (impl_->http.bind_to_port(o.host, o.port)) {
        impl_->port = o.port;
    }
    if (impl_->port <= 0)
        fail(ErrorCategory::Io, "cannot listen on ", o.host, ":", o.port,
             " (address in use, or not a local address)");
    impl_->http.widen_backlog();
    return impl_->port;
}

void Server::run() {
    impl_->http.listen_after_bind();
}

void Server::shutdown() {
    std::call_once(impl_->shutdown_once, [this] {
        ServerState& s = impl_->state;
        s.draining = true;
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration<double>(s.options.shutdown_grace_s);
        while (s.in_flight > 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        s.cancel_all = true;
        const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (s.in_flight > 0 && std::chrono::steady_clock::now() < hard)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        impl_->http.stop();
    });
}

} // namespace ninfer::server
