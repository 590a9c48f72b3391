#include "sampling_flags.h"

#include <cmath>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "server/model_context.h"

namespace ninfer::app {
namespace {

// "ID=BIAS" (llama.cpp writes ID+BIAS / ID-BIAS; OpenAI's logit_bias holds the same pairs).
std::pair<int32_t, float> parse_logit_bias(const std::string& item) {
    const size_t eq = item.find('=');
    size_t id_end = 0, bias_end = 0;
    int64_t id = -1;
    double bias = NAN;
    try {
        if (eq != std::string::npos) {
            id = std::stoll(item.substr(0, eq), &id_end);
            bias = std::stod(item.substr(eq + 1), &bias_end);
        }
    } catch (const std::exception&) {
        id = -1;
    }
    if (eq == std::string::npos || id_end != eq || bias_end != item.size() - eq - 1 || id < 0 ||
        id > INT32_MAX || !std::isfinite(bias) || std::fabs(bias) > 100)
        throw CLI::ValidationError("--logit-bias", "expected ID=BIAS with a token id and a bias "
                                                   "in [-100, 100], got '" + item + "'");
    return {int32_t(id), float(bias)};
}

} // namespace

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
    app.add_option_function<std::vector<std::string>>(
           "--logit-bias",
           [&g](const std::vector<std::string>& items) {
               for (const std::string& item : items) g.logit_bias.push_back(parse_logit_bias(item));
           },
           "ID=BIAS: add BIAS (-100..100) to token ID's logit before sampling (repeatable; "
           "-100 bans the token, 100 all but forces it)")
        ->allow_extra_args(false);
}

SamplingOptions resolve_sampling_flags(const SamplingFlags& flags,
                                       const std::filesystem::path& model_dir) {
    server::SamplingParams given = flags.given;
    if (flags.greedy) given.temperature = 0.0;
    return server::resolve_sampling(given, server::read_sampling_defaults(model_dir));
}

} // namespace ninfer::app
