// ninfer serve: the OpenAI- and Anthropic-compatible HTTP server (src/server) on one model, or
// on random weights of a config (--random-weights --config FILE) with the text side (tokenizer,
// chat template, generation_config.json) from --tokenizer DIR. SIGINT/SIGTERM stop it
// gracefully: no new requests, in-flight ones finish within the grace period (then are
// cancelled), exit status 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "engine_flags.h"
#include "hf_cache.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "media/preprocess.h"
#include "server/server.h"

namespace ninfer::app {
namespace {

struct ServeOptions {
    EngineOptions engine;
    server::ServerOptions server;
    std::vector<std::string> api_keys;
    std::string api_key_file;
    std::vector<std::string> names;
    int64_t default_max_tokens = 4096;
    int reasoning_budget = -1;
    std::string template_kwargs; // --chat-template-kwargs: a JSON object
    std::string template_file;   // --chat-template: replaces the model's template
    std::string text_dir;        // --tokenizer: tokenizer, chat template, generation_config.json
    std::string peer_parser;     // --reasoning-parser / --tool-call-parser: checked, then unused
    bool peer_auto_tools = false; // --enable-auto-tool-choice: always on
};

// With --random-weights: the tokenizer directory (--tokenizer, else the demo model's).
std::string random_weights_text_dir(const ServeOptions& o) {
    require(!o.engine.config_file.empty(), "--random-weights needs --config FILE (an HF config)");
    require(o.engine.model_dir.empty(), "--random-weights takes --config FILE, not --model");
    if (!o.text_dir.empty()) return o.text_dir;
    try {
        return default_model_dir();
    } catch (const Error& e) {
        fail(ErrorCategory::Io, "--random-weights without --tokenizer DIR uses the demo model's ",
             "tokenizer, which was not found: ", e.what());
    }
}

// Every id of the tokenizer must be a token of the model (ids beyond the tokenizer that the
// model generates read as U+FFFD).
void check_vocab(const text::Tokenizer& tok, const std::string& dir, int64_t vocab,
                 const std::string& model) {
    require(tok.vocab_size() <= vocab, "the tokenizer of ", dir, " has ", tok.vocab_size(),
            " token ids, more than the vocabulary of ", model, " (", vocab,
            "); give --tokenizer DIR with a tokenizer that fits it");
}

// One line on what the engine holds once built.
void print_engine(const EngineOptions& o, const EngineStats& st) {
    std::string cache = "off";
    if (o.prefix_cache) {
        cache = "on (" + std::to_string(st.snapshots_device_total) + " snapshot slots";
        if (o.prefix_cache_host_gb > 0) {
            char host[64];
            std::snprintf(host, sizeof host, ", %.3g GB host", o.prefix_cache_host_gb);
            cache += host;
        }
        cache += ")";
    }
    // The step's scratch is measured on a GPU only (the CPU plan has no memory budget).
    char scratch[64] = "";
    if (st.step_scratch_bytes > 0)
        std::snprintf(scratch, sizeof scratch, " (%.2f GiB of step scratch)",
                      double(st.step_scratch_bytes) / double(1 << 30));
    std::fprintf(stderr,
                 "ninfer: engine: KV capacity %lld tokens (%s), %lld sequence slots (%s GDN "
                 "state), %lld batch tokens%s, prefix cache %s\n",
                 (long long)st.kv_capacity_tokens, st.kv_dtype.c_str(),
                 (long long)st.state_slots_total, st.gdn_state_dtype.c_str(),
                 (long long)st.max_batch_tokens, scratch, cache.c_str());
}

// --chat-template-kwargs, checked before the model loads.
nlohmann::ordered_json parse_template_kwargs(const std::string& text) {
    if (text.empty()) return nlohmann::ordered_json::object();
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::ordered_json::exception& e) {
        fail(ErrorCategory::InvalidArgument, "--chat-template-kwargs: not JSON: ", e.what());
    }
    require(j.is_object(),
            "--chat-template-kwargs: expected a JSON object, e.g. "
            "'{\"enable_thinking\": false}', got ",
            text);
    return j;
}

std::vector<std::string> read_key_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail(ErrorCategory::Io, "cannot read the API key file ", path);
    std::vector<std::string> keys;
    std::string line;
    while (std::getline(in, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
            line.pop_back();
        const size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#') continue;
        keys.push_back(line.substr(start));
    }
    require(!keys.empty(), "the API key file ", path, " holds no key");
    return keys;
}

int serve(ServeOptions& o) {
    // Signals go to one waiting thread; every other thread (engine, HTTP) inherits the mask.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    server::ServerOptions& so = o.server;
    so.api_keys = o.api_keys;
    if (!o.api_key_file.empty())
        for (auto& k : read_key_file(o.api_key_file)) so.api_keys.push_back(k);
    const nlohmann::ordered_json template_defaults = parse_template_kwargs(o.template_kwargs);
    const bool random = o.engine.random_weights;
    const std::filesystem::path dir(o.text_dir);
    const text::Tokenizer tokenizer = text::Tokenizer::from_model_dir(dir);
    const text::ChatTemplate chat_template =
        text::ChatTemplate::from_model_dir(dir, o.template_file);
    if (random)
        check_vocab(tokenizer, o.text_dir, io::load_hf_config(o.engine.config_file).vocab_size,
                    o.engine.config_file);
    // Random weights: the config from --config, the token limit and EOS ids from the text
    // directory, so sampled ids stay inside the tokenizer.
    if (random) o.engine.model_dir = o.text_dir;
    Engine engine(o.engine);
    if (!random && o.text_dir != o.engine.model_dir)
        check_vocab(tokenizer, o.text_dir, engine.model_info().token_limit, o.engine.model_dir);
    print_engine(o.engine, engine.stats());
    // The server admits the engine's state slots (from memory when --max-sequences is 0) plus
    // --max-queue: so.max_sequences stays 0.
    server::ModelContext ctx;
    ctx.engine = &engine;
    ctx.tokenizer = &tokenizer;
    ctx.chat_template = &chat_template;
    ctx.names = o.names;
    if (ctx.names.empty()) {
        // A hub cache snapshot is named by its model id, as vLLM names it.
        const std::optional<std::string> repo_id =
            random ? std::nullopt : repo_id_of_snapshot(o.engine.model_dir);
        ctx.names.push_back(random    ? std::filesystem::path(o.engine.config_file).stem().string()
                            : repo_id ? *repo_id
                                      : std::filesystem::absolute(o.engine.model_dir)
                                            .lexically_normal()
                                            .filename()
                                            .string());
    }
    if (ctx.names[0].empty()) ctx.names[0] = "model";
    ctx.created = int64_t(std::time(nullptr));
    ctx.defaults = server::read_sampling_defaults(dir);
    ctx.default_max_tokens = o.default_max_tokens;
    ctx.default_reasoning_budget = o.reasoning_budget;
    ctx.template_defaults = template_defaults;
    ctx.allow_media_urls = so.allow_image_urls;
    if (engine.model_info().vision) // images and videos as the checkpoint's processor takes them
        ctx.vision = std::make_shared<const media::VisionPreprocessConfig>(
            media::load_preprocess_config(dir));

    server::Server srv(ctx, so);
    const int port = srv.bind();
    if (so.api_keys.empty() && so.host != "127.0.0.1" && so.host != "localhost" && so.host != "::1")
        std::fprintf(stderr, "ninfer: warning: listening on %s without an API key\n",
                     so.host.c_str());
    std::fprintf(stderr,
                 "ninfer: serving '%s' on http://%s:%d (context %lld tokens; %lld sequences "
                 "run, %d more wait, then 429: --max-queue)\n",
                 ctx.names[0].c_str(), so.host.c_str(), port,
                 (long long)engine.model_info().max_context,
                 (long long)engine.stats().state_slots_total, so.max_queue);
    if (so.webui)
        std::fprintf(stderr, "ninfer: chat page on http://%s:%d/ (--no-webui turns it off)\n",
                     so.host.c_str(), port);
    std::fflush(stderr);
    std::atomic<bool> listener_done{false};
    std::thread waiter([&] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        if (!listener_done) {
            std::fprintf(stderr, "ninfer: %s: shutting down\n",
                         sig == SIGINT ? "SIGINT" : "SIGTERM");
            std::fflush(stderr);
        }
        srv.shutdown();
    });
    srv.run();
    // The listener stopped on its own (not by a signal): wake the waiter.
    listener_done = true;
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    std::fprintf(stderr, "ninfer: server stopped\n");
    return 0;
}

} // namespace

Action add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::Option* model = app.add_option(
        "--model", o->engine.model_dir,
        "HF checkpoint directory with tokenizer files and a chat template, or a model id "
        "(ORG/NAME) downloaded to the Hugging Face cache (default: the embedded demo model, "
        "models/ninfer-demo)");
    // `ninfer serve MODEL`, as `vllm serve MODEL` takes it.
    app.add_option("model", o->engine.model_dir, "The model, as --model")->excludes(model);
    app.add_option("--tokenizer", o->text_dir,
                   "Directory (or ORG/NAME in the Hugging Face cache) with tokenizer.json, "
                   "tokenizer_config.json, the chat template and generation_config.json: the "
                   "text side of --random-weights (default: the demo model's); with a model, "
                   "replaces its own")
        ->transform(hub_model_path());
    app.add_option("--host", o->server.host, "Address to listen on (default 127.0.0.1)");
    app.add_option("--port", o->server.port, "Port (0: any free port)")
        ->check(CLI::Range(0, 65535));
    app.add_option("--api-key", o->api_keys,
                   "Require this key (Authorization: Bearer or x-api-key); repeatable; without "
                   "it, $NINFER_API_KEY (as vLLM reads $VLLM_API_KEY: off the command line)")
        ->envname("NINFER_API_KEY");
    app.add_option("--api-key-file", o->api_key_file, "File with API keys, one per line");
    app.add_option("--served-model-name", o->names,
                   "Model name(s) clients use (default: the model directory's name, or the "
                   "config file's stem with --random-weights)");
    app.add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body (413)")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-queue", o->server.max_queue,
                   "Sequences that may wait beyond the engine's slots; more get 429")
        ->check(CLI::NonNegativeNumber);
    // vLLM's and SGLang's parser switches, so their Qwen command lines run unchanged: ninfer
    // always parses Qwen's reasoning and both of its tool-call formats (XML and hermes JSON).
    app.add_option("--reasoning-parser", o->peer_parser,
                   "Accepted as vLLM takes it: qwen3 (ninfer always splits <think> reasoning off)")
        ->check(CLI::IsMember({"qwen3"}));
    app.add_option("--tool-call-parser", o->peer_parser,
                   "Accepted as vLLM takes it: qwen3_coder, qwen3_xml or hermes (ninfer parses "
                   "all of these Qwen tool-call formats whichever is named)")
        ->check(CLI::IsMember({"qwen3_coder", "qwen3_xml", "hermes"}));
    app.add_flag("--enable-auto-tool-choice", o->peer_auto_tools,
                 "Accepted as vLLM takes it (tool_choice auto is always served)");
    app.add_option("--reasoning-budget", o->reasoning_budget,
                   "Reasoning tokens before </think> is forced when a request sets no budget "
                   "(-1: unlimited)")
        ->check(CLI::Range(-1, 1 << 30));
    app.add_option("--default-max-tokens", o->default_max_tokens,
                   "max_tokens when a request gives none (capped by the context)")
        ->check(CLI::PositiveNumber);
    app.add_option("--chat-template", o->template_file,
                   "A Jinja chat template file to use instead of the model's");
    app.add_option("--chat-template-kwargs", o->template_kwargs,
                   "JSON object of chat-template variables for every request, e.g. "
                   "'{\"enable_thinking\": false}'; a request's own settings override it");
    app.add_option("--keepalive", o->server.keepalive_s,
                   "Seconds between SSE keep-alives while nothing is generated")
        ->check(CLI::PositiveNumber);
    app.add_option("--shutdown-timeout", o->server.shutdown_grace_s,
                   "Seconds in-flight requests may finish after SIGTERM before being cancelled")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--read-timeout", o->server.read_timeout_s,
                   "Seconds a request (headers and body) may take to arrive; then 408")
        ->check(CLI::PositiveNumber);
    app.add_option("--keep-alive-timeout", o->server.keep_alive_s,
                   "Seconds an idle keep-alive connection stays open")
        ->check(CLI::PositiveNumber);
    app.add_flag("--log-content", o->server.log_content, "Log prompts and outputs");
    app.add_flag("!--no-log-requests", o->server.log_requests, "No per-request log lines");
    app.add_flag("!--no-webui", o->server.webui,
                 "Do not serve the web chat page at / (then / is a 404, as for any unknown path)");
    app.add_flag("--allow-image-urls", o->server.allow_image_urls,
                 "fetch http(s) image URLs in requests (file:// is never allowed)");
    app.add_option("--responses-store", o->server.responses_store,
                   "Responses API: responses kept in memory for previous_response_id and GET "
                   "/v1/responses/{id}, least recently used first out (at most 512 MiB); 0: "
                   "stateless, previous_response_id is a 400")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("!--no-warm-next-turn", o->server.warm_next_turn,
                 "Do not prefill a chat's next turn (the answer as the follow-up will send it) "
                 "into the prefix cache while the server is idle");
    add_engine_options(app, o->engine,
                       kRandomWeightFlags | kDeviceFlags | kContextFlag | kPrefillFlag |
                           kBatchFlags | kMemoryFlags | kPrefixCacheFlags | kSpeculativeFlags);
    return [o] {
        if (o->engine.random_weights) {
            o->text_dir = random_weights_text_dir(*o);
        } else {
            require(o->engine.config_file.empty(), "--config needs --random-weights");
            o->engine.model_dir = model_dir_or_default(o->engine.model_dir);
            if (o->text_dir.empty()) o->text_dir = o->engine.model_dir;
        }
        return serve(*o);
    };
}

} // namespace ninfer::app
