// ninfer perplexity: scores a text file, as llama-perplexity does. The text is tokenized with the
// model's tokenizer (special tokens in it are matched, as HF tokenizers does) and cut into
// consecutive non-overlapping windows of --context tokens (the last may be shorter); each window
// is scored from an empty state: the NLL of its tokens 1..n-1 given the tokens before them
// (GenerationRequest::prompt_logprobs). Prints one JSON object: file_tokens, context, windows,
// tokens (scored), mean_nll, ppl, seconds.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "engine_flags.h"
#include "ninfer/engine.h"
#include "text/tokenizer.h"

namespace ninfer::app {
namespace {

struct PerplexityOptions {
    EngineOptions engine;
    std::string file;
    int context = 512;
    int chunks = 0; // windows scored (0: all)
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorCategory::Io, "--file ", path, ": cannot open");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int perplexity(PerplexityOptions o) {
    require(o.context >= 2, "--context must be at least 2");
    o.engine.model_dir = model_dir_or_default(o.engine.model_dir);
    // Prompt scoring only: no decode step replays a graph.
    if (o.engine.graph_warmup < 0) o.engine.graph_warmup = 0;
    const std::vector<int32_t> ids =
        text::Tokenizer::from_model_dir(o.engine.model_dir).encode(read_file(o.file));
    std::vector<std::vector<int32_t>> windows;
    for (size_t at = 0; at + 1 < ids.size(); at += size_t(o.context)) {
        if (o.chunks > 0 && windows.size() == size_t(o.chunks)) break;
        const size_t end = std::min(ids.size(), at + size_t(o.context));
        windows.emplace_back(ids.begin() + long(at), ids.begin() + long(end));
    }
    require(!windows.empty(), o.file, ": fewer than 2 tokens to score");
    if (o.engine.max_context == 0) o.engine.max_context = o.context + 1; // prompt < max_context
    o.engine.prefill_chunk = std::max(o.engine.prefill_chunk, 1);
    const auto t0 = std::chrono::steady_clock::now();
    Engine engine(o.engine);
    std::vector<RequestStream> streams;
    for (const auto& w : windows) {
        GenerationRequest r;
        r.prompt = w;
        r.max_new_tokens = 0;
        r.prompt_logprobs = true;
        streams.push_back(engine.submit(std::move(r)));
    }
    double nll = 0;
    int64_t scored = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
        RequestUpdate u;
        int64_t got = 0;
        while (streams[i].next(u)) {
            for (const auto& t : u.prompt_logprobs) nll -= double(t.logprob);
            got += int64_t(u.prompt_logprobs.size());
            if (u.finished && u.reason == FinishReason::Error)
                fail(ErrorCategory::Internal, "window ", i, ": ", u.error);
        }
        require(got == int64_t(windows[i].size()) - 1, "window ", i, ": ", got, " scores for ",
                windows[i].size(), " tokens");
        scored += got;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double mean = nll / double(scored);
    const nlohmann::json out = {{"model", o.engine.model_dir},
                                {"file", o.file},
                                {"file_tokens", ids.size()},
                                {"context", o.context},
                                {"windows", windows.size()},
                                {"tokens", scored},
                                {"mean_nll", mean},
                                {"ppl", std::exp(mean)},
                                {"seconds", seconds}};
    std::cout << out.dump() << std::endl;
    std::fprintf(stderr, "ninfer: perplexity %.4f over %lld tokens in %zu windows, %.1f tok/s\n",
                 std::exp(mean), static_cast<long long>(scored), windows.size(),
                 double(scored) / seconds);
    return 0;
}

} // namespace

Action add_perplexity_command(CLI::App& app) {
    auto o = std::make_shared<PerplexityOptions>();
    app.add_option("--model", o->engine.model_dir,
                   "Model directory, or ORG/NAME in the Hugging Face cache (default: the demo "
                   "model)");
    app.add_option("--file", o->file, "Text file to score")->required();
    app.add_option("--context", o->context, "Tokens per window")->check(CLI::PositiveNumber);
    app.add_option("--chunks", o->chunks, "Score only the first N windows (0: all)")
        ->check(CLI::NonNegativeNumber);
    add_engine_options(app, o->engine, kDeviceFlags | kPrefillFlag | kReferenceFlag | kMemoryFlags);
    return [o] { return perplexity(*o); };
}

} // namespace ninfer::app
