// What every request handler shares: the engine, the tokenizer and chat template of the served
// model, its name, and the defaults that apply when a request does not say.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "media/preprocess.h"
#include "ninfer/engine.h"
#include "server/chat_job.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ninfer::server {

struct ModelContext {
    Engine* engine = nullptr;
    const text::Tokenizer* tokenizer = nullptr;
    const text::ChatTemplate* chat_template = nullptr;
    std::vector<std::string> names; // served model names; names[0] is the id
    int64_t created = 0;            // unix time the model was loaded (GET /v1/models)
    SamplingParams defaults;        // generation_config.json sampling fields
    int64_t default_max_tokens = 4096;
    int default_reasoning_budget = -1; // serve --reasoning-budget (-1: unlimited)
    // Chat-template variables every request starts from (serve --chat-template-kwargs); a
    // request's chat_template_kwargs, reasoning_effort or thinking settings override them.
    nlohmann::ordered_json template_defaults = nlohmann::ordered_json::object();
    // Media: fetch http(s) media URLs (serve --allow-image-urls), and the model's image/video
    // preprocessing (null: the model takes no media).
    bool allow_media_urls = false;
    std::shared_ptr<const media::VisionPreprocessConfig> vision;
};

// The sampling fields of DIR/generation_config.json (temperature, top_p, top_k, min_p,
// repetition_penalty; do_sample false means greedy). Empty when absent or unreadable.
SamplingParams read_sampling_defaults(const std::filesystem::path& dir);

// Client fields over the defaults; temperature 0 means greedy. Values are range-checked by the
// translators; the engine validates again.
SamplingOptions resolve_sampling(const SamplingParams& client, const SamplingParams& defaults);

} // namespace ninfer::server
