#include "sampling_flags.h"

#include <CLI/CLI.hpp>

#include "server/model_context.h"

namespace ninfer::app {

void add_sampling_options(CLI::App& app, SamplingFlags& f, bool all_penalties) {
    server::SamplingParams& g = f.given;
    app.add_flag("--greedy", f.greedy, "Greedy decoding (argmax)");
    app.add_option_function<double>(
        "--temperature", [&g](double v) { g.temperature = v; },
        "Sampling temperature (0: greedy; default: the model's generation_config.json)");
    app.add_option_function<int64_t>(
        "--top-k", [&g](int64_t v) { g.top_k = v; }, "Keep the k most likely tokens (0: off)");
    app.add_option_function<double>(
        "--top-p", [&g](double v) { g.top_p = v; }, "Nucleus sampling mass (1: off)");
    app.add_option_function<double>(
        "--min-p", [&g](double v) { g.min_p = v; },
        "Drop tokens below min_p * the top probability");
    app.add_option_function<double>(
        "--presence-penalty", [&g](double v) { g.presence_penalty = v; },
        "OpenAI presence penalty");
    if (all_penalties) {
        app.add_option_function<double>(
            "--frequency-penalty", [&g](double v) { g.frequency_penalty = v; },
            "OpenAI frequency penalty");
        app.add_option_function<double>(
            "--repetition-penalty", [&g](double v) { g.repetition_penalty = v; },
            "Repetition penalty (1: off)");
    }
    app.add_option_function<int64_t>(
           "--seed", [&g](int64_t v) { g.seed = uint64_t(v); }, "Sampling seed (replays exactly)")
        ->check(CLI::NonNegativeNumber);
}

SamplingOptions resolve_sampling_flags(const SamplingFlags& flags,
                                       const std::filesystem::path& model_dir) {
    server::SamplingParams given = flags.given;
    if (flags.greedy) given.temperature = 0.0;
    return server::resolve_sampling(given, server::read_sampling_defaults(model_dir));
}

} // namespace ninfer::app
