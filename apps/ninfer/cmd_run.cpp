// ninfer run: generate from token ids (stream ids to stdout, or print one JSON object), or from
// text: --prompt / --messages go through the chat template and stream text (text_generation.h).
// --random-weights --config FILE runs a config's shapes without a checkpoint, from token ids
// (there is no tokenizer): precision and route checks at a real model's shapes.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "engine_flags.h"
#include "ninfer/engine.h"
#include "sampling_flags.h"
#include "text_generation.h"

namespace ninfer::app {
namespace {

struct RunOptions {
    EngineOptions engine;
    std::string prompt_ids;
    bool prompt_ids_given = false;
    TextOptions text;
    int max_new = 64;
    SamplingFlags sampling;
    bool print_token_ids = false;
    bool json = false;
    int top_logprobs = 0;
    bool ignore_eos = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        require(used == item.size() && !item.empty() && v >= 0 && v <= INT32_MAX, "--prompt-ids: '",
                item, "' is not a token id");
        ids.push_back(int32_t(v));
    }
    require(!ids.empty(), "--prompt-ids: no token ids given");
    return ids;
}

nlohmann::json token_json(const GeneratedToken& t) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& alt : t.top_logprobs)
        top.push_back({{"id", alt.id}, {"logprob", alt.logprob}});
    return {{"id", t.id}, {"logprob", t.logprob}, {"top_logprobs", top}};
}

int run(const RunOptions& o) {
    require(o.top_logprobs == 0 || o.json, "--top-logprobs needs --json");
    const bool text_mode = !o.text.prompt.empty() || !o.text.messages_file.empty();
    require(text_mode != o.prompt_ids_given,
            "give exactly one of --prompt-ids, --prompt or --messages");
    require(!text_mode || (!o.json && o.top_logprobs == 0), "--json needs --prompt-ids");
    GenerationRequest request;
    if (!text_mode) request.prompt = parse_ids(o.prompt_ids);
    request.max_new_tokens = o.max_new;
    request.ignore_eos = o.ignore_eos;
    request.top_logprobs = o.top_logprobs;
    request.sampling = resolve_sampling_flags(o.sampling, o.engine.model_dir);
    if (text_mode) {
        TextOptions text = o.text;
        text.print_token_ids = o.print_token_ids;
        return run_text(o.engine, text, request);
    }
    Engine engine(o.engine);
    RequestStream stream = engine.submit(request);
    nlohmann::json tokens = nlohmann::json::array();
    RequestUpdate u;
    RequestUpdate last;
    bool first = true;
    while (stream.next(u)) {
        for (const auto& t : u.tokens) {
            if (o.json) {
                tokens.push_back(token_json(t));
            } else {
                std::printf(first ? "%d" : " %d", t.id);
                first = false;
            }
        }
        if (!o.json) std::fflush(stdout);
        if (u.finished) last = u;
    }
    if (o.json) {
        nlohmann::json out = {{"prompt_tokens", request.prompt.size()},
                              {"tokens", tokens},
                              {"finish_reason", finish_reason_name(last.reason)}};
        if (!o.engine.speculative.empty())
            out["speculative"] = nlohmann::json::parse(speculative_json(
                o.engine.speculative, o.engine.draft_tokens, last.timings.speculative));
        std::cout << out.dump() << std::endl;
    } else {
        std::printf("\n");
    }
    print_generation_stats(last.timings, last.reason);
    if (last.reason == FinishReason::Error) {
        std::fprintf(stderr, "ninfer: request failed: %s\n", last.error.c_str());
        return 1;
    }
    return 0;
}

} // namespace

Action add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    app.add_option("--model", o->engine.model_dir,
                   "HF checkpoint directory, or ORG/NAME in the Hugging Face cache (default: the demo "
                   "model, see README)");
    CLI::Option* ids =
        app.add_option("--prompt-ids", o->prompt_ids, "Prompt token ids, comma separated");
    add_text_options(app, o->text);
    app.add_option("--max-new", o->max_new, "Most tokens to generate")
        ->check(CLI::NonNegativeNumber);
    add_sampling_options(app, o->sampling, /*all_penalties=*/true);
    app.add_flag("--print-token-ids", o->print_token_ids, "Print generated token ids");
    app.add_flag("--json", o->json, "Print one JSON object with ids and logprobs");
    app.add_option("--top-logprobs", o->top_logprobs, "Alternatives per token in --json output");
    app.add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-sequence tokens");
    add_engine_options(app, o->engine,
                       kDeviceFlags | kContextFlag | kSingleRequestPrefill | kReferenceFlag | kMemoryFlags |
                           kSpeculativeFlags | kRandomWeightFlags);
    return [o, ids] {
        o->prompt_ids_given = ids->count() > 0;
        if (o->engine.random_weights) {
            require(!o->engine.config_file.empty(),
                    "--random-weights needs --config FILE (an HF config)");
            require(o->engine.model_dir.empty(), "--random-weights takes --config FILE, not --model");
            require(o->prompt_ids_given,
                    "--random-weights generates from --prompt-ids (there is no tokenizer)");
        } else {
            require(o->engine.config_file.empty(), "--config needs --random-weights");
            o->engine.model_dir = model_dir_or_default(o->engine.model_dir);
        }
        // One request: the graphs of batch 1 are the ones it replays.
        if (o->engine.graph_warmup < 0) o->engine.graph_warmup = 1;
        return run(*o);
    };
}

} // namespace ninfer::app
