// Sampling flags shared by run and chat. A flag that is not given falls back to the model's
// generation_config.json (temperature, top_p, top_k, min_p, repetition_penalty; do_sample false
// means greedy), then to the engine's neutral default: the same resolution the server applies to
// a request's fields, so `ninfer run` samples as `ninfer serve` does for the same model.
#pragma once

#include <filesystem>

#include "ninfer/engine.h"
#include "server/chat_job.h"

namespace CLI {
class App;
}

namespace ninfer::app {

struct SamplingFlags {
    server::SamplingParams given; // the flags given on the command line
    bool greedy = false;          // --greedy: temperature 0
};

// --greedy, --temperature, --top-k, --top-p, --min-p, --presence-penalty, --seed, --logit-bias
// and, with `all_penalties`, --frequency-penalty and --repetition-penalty.
void add_sampling_options(CLI::App& app, SamplingFlags& flags, bool all_penalties);

// The sampling options for the model in `model_dir`: the flags over its generation_config.json.
SamplingOptions resolve_sampling_flags(const SamplingFlags& flags,
                                       const std::filesystem::path& model_dir);

} // namespace ninfer::app
