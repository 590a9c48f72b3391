// ninfer's HTTP server: the OpenAI (/v1/chat/completions, /v1/completions, /v1/models) and
// Anthropic (/v1/messages, /v1/messages/count_tokens) APIs plus /tokenize, /detokenize,
// /health, /metrics and /openapi.json, over the public Engine API (cpp-httplib transport), and
// the web chat page at / (src/server/webui/index.html, embedded at build time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/model_context.h"

namespace ninfer::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                   // 0: any free port (see Server::port())
    std::vector<std::string> api_keys; // empty: no authentication
    size_t max_body_bytes = 8u << 20;  // larger bodies get 413
    // Sequences waiting beyond the engine's slots. A load test at 256 concurrent clients
    // against the slots that fit the GPU (164 for the fp8 35B on an H100) must queue, as vLLM
    // and SGLang do, not answer 429. Each waiting request holds an HTTP thread (the pool has
    // slots + max_queue + 64, made at start) and its prompt, no KV: 256 keeps the threads of a
    // default server well under common per-container process limits.
    int max_queue = 256;
    int max_sequences = 0;             // the engine's slots (0: its stats' state_slots_total)
    double keepalive_s = 10;           // SSE keep-alive interval while nothing is generated
    double shutdown_grace_s = 30;      // in-flight requests may finish this long on SIGTERM
    bool log_requests = true;          // one JSON line per request on stderr
    bool log_content = false;          // include prompts and outputs in the log lines
    int read_timeout_s = 30;           // slow clients: seconds to wait for request bytes
    int keep_alive_s = 5;              // idle HTTP keep-alive connections close after this
    bool webui = true;                 // serve the chat page at / (--no-webui: / is a 404)
    bool allow_image_urls = false;     // fetch http(s) image URLs in requests (never file://)
    bool warm_next_turn = true;        // prefill a chat's next turn when idle (warm_turn.h)
    size_t responses_store = 1024;     // Responses API responses kept (0: none; response_store.h)
};

class Server {
public:
    Server(ModelContext model, ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the listening socket (ninfer::Error Io when it cannot) and returns the port.
    int bind();
    // Serves until shutdown() completes. Call bind() first.
    void run();
    // Thread-safe: stops admitting generations (503), lets in-flight ones run up to the grace
    // period, cancels the rest, then stops the listener so run() returns.
    void shutdown();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::server
