// The API-neutral form of a request, filled by the OpenAI and Anthropic translators and turned
// into a GenerationSpec by prepare.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/engine.h"
#include "server/request_fields.h"

namespace ninfer::server {

// Sampling fields as given by the client; unset ones take the model's generation_config.json
// defaults (then the engine's).
struct SamplingParams {
    std::optional<double> temperature, top_p, min_p, presence_penalty, frequency_penalty,
        repetition_penalty;
    std::optional<int64_t> top_k;
    std::optional<uint64_t> seed;
    std::vector<std::pair<int32_t, float>> logit_bias; // OpenAI's logit_bias, ids ascending
    std::vector<int32_t> allowed_token_ids;            // vLLM's
};

// Options shared by chat and completions.
struct GenOptions {
    SamplingParams sampling;
    std::optional<int64_t> max_tokens; // unset: the server default, capped by the context
    int64_t min_tokens = 0;            // vLLM's: no stop id before this many tokens
    // vLLM's: keep only the prompt's last N tokens (-1: as many as the context leaves room for).
    std::optional<int64_t> truncate_prompt_tokens;
    std::vector<std::string> stop;
    std::vector<int32_t> stop_token_ids;
    bool ignore_eos = false;
    int n = 1;
    bool logprobs = false;
    int top_logprobs = 0;
    bool stream = false;
    bool include_usage = false;
    int priority = 0; // scheduling: lower runs first (vLLM's extension)
};

struct ToolChoice {
    enum class Kind { Auto, None, Required, Named };
    Kind kind = Kind::Auto;
    std::string name; // Named
};

struct ChatJob {
    Json messages = Json::array(); // OpenAI-style messages, as the chat template takes them
    Json tools;                    // null or an array of {"type": "function", "function": ...}
    ToolChoice tool_choice;
    bool parallel_tool_calls = true;
    Json template_vars = Json::object(); // chat_template_kwargs (enable_thinking, ...)
    bool continue_final = false;         // the last (assistant) message is continued
    bool add_generation_prompt = true;   // (when not continuing)
    // Reasoning tokens before </think> is forced (Anthropic thinking.budget_tokens, OpenAI
    // reasoning_effort); unset: the server's --reasoning-budget, and for structured output
    // (a forced tool call, response_format) at most max_tokens minus a reserve (prepare.h).
    std::optional<int> reasoning_budget;
    // response_format: none, any JSON object (json_object), or a JSON schema; Choice: exactly
    // one of `choices` (vLLM's guided_choice / structured_outputs.choice).
    enum class Format { Text, JsonObject, JsonSchema, Choice };
    Format format = Format::Text;
    nlohmann::ordered_json schema;
    std::vector<std::string> choices;
    GenOptions gen;
};

struct CompletionJob {
    std::vector<std::string> prompts;             // text prompts, or
    std::vector<std::vector<int32_t>> prompt_ids; // token id prompts
    bool echo = false;
    GenOptions gen;
};

} // namespace ninfer::server
