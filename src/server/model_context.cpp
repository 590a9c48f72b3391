#include "server/model_context.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace ninfer::server {

SamplingParams read_sampling_defaults(const std::filesystem::path& dir) {
    SamplingParams p;
    std::ifstream in(dir / "generation_config.json");
    if (!in) return p;
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(in, nullptr, false);
    if (!j.is_object()) return p;
    auto number = [&](const char* key) -> std::optional<double> {
        auto it = j.find(key);
        if (it == j.end() || !it->is_number()) return std::nullopt;
        return it->get<double>();
    };
    p.temperature = number("temperature");
    p.top_p = number("top_p");
    p.min_p = number("min_p");
    p.repetition_penalty = number("repetition_penalty");
    if (auto k = number("top_k")) p.top_k = int64_t(*k);
    auto sample = j.find("do_sample");
    if (sample != j.end() && sample->is_boolean() && !sample->get<bool>()) p.temperature = 0.0;
    return p;
}

SamplingOptions resolve_sampling(const SamplingParams& c, const SamplingParams& d) {
    SamplingOptions s;
    auto pick = [](const auto& client, const auto& fallback, auto engine_default) {
        return client ? *client : fallback ? *fallback : engine_default;
    };
    s.temperature = float(pick(c.temperature, d.temperature, 1.0));
    s.greedy = s.temperature <= 0.0f;
    if (s.greedy) s.temperature = 1.0f;
    s.top_p = float(pick(c.top_p, d.top_p, 1.0));
    s.top_k = int(pick(c.top_k, d.top_k, int64_t(0)));
    s.min_p = float(pick(c.min_p, d.min_p, 0.0));
    s.presence_penalty = float(pick(c.presence_penalty, d.presence_penalty, 0.0));
    s.frequency_penalty = float(pick(c.frequency_penalty, d.frequency_penalty, 0.0));
    s.repetition_penalty = float(pick(c.repetition_penalty, d.repetition_penalty, 1.0));
    if (c.seed) s.seed = *c.seed;
    s.logit_bias = c.logit_bias;
    s.allowed_token_ids = c.allowed_token_ids;
    return s;
}

} // namespace ninfer::server
