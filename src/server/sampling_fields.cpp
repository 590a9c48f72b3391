// sampling_fields.h: logit_bias and vLLM's request extensions.
#include "server/sampling_fields.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "server/api_error.h"

namespace ninfer::server {
namespace {

constexpr size_t kMaxGuidedChoices = 256;
constexpr size_t kMaxLogitBiasEntries = 1024; // OpenAI documents no limit; bounds a request's host work

// {"token id": bias, ...}: ids as decimal strings (JSON keys), biases in [-100, 100]. Whether an
// id is a token of this model is checked against the tokenizer when the request is prepared.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& bias) {
    if (bias.is_null()) return {};
    if (!bias.is_object())
        bad_param("logit_bias", "'logit_bias' must map token ids (strings) to numbers");
    if (bias.size() > kMaxLogitBiasEntries)
        bad_param("logit_bias", "'logit_bias' may hold at most " +
                                    std::to_string(kMaxLogitBiasEntries) + " tokens");
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, value] : bias.items()) {
        const bool digits = !key.empty() && key.size() <= 10 &&
                            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
        const int64_t id = digits ? std::stoll(key) : -1;
        if (id < 0 || id > INT32_MAX)
            bad_param("logit_bias", "'logit_bias' key '" + key + "' is not a token id");
        if (!value.is_number() || !std::isfinite(value.get<double>()) ||
            std::fabs(value.get<double>()) > 100)
            bad_param("logit_bias", "'logit_bias' of token " + key + " must be a number in [-100, 100]");
        out.emplace_back(int32_t(id), float(value.get<double>()));
    }
    std::sort(out.begin(), out.end());
    return out;
}

// One of `value`'s strings: guided_choice / structured_outputs.choice.
std::vector<std::string> parse_choices(const Json& value, const char* name) {
    if (!value.is_array() || value.empty() || value.size() > kMaxGuidedChoices)
        bad_param(name, std::string("'") + name + "' must be a list of 1 to " +
                            std::to_string(kMaxGuidedChoices) + " strings");
    std::vector<std::string> out;
    for (const auto& c : value) {
        if (!c.is_string() || c.get<std::string>().empty())
            bad_param(name, std::string("'") + name + "' must hold non-empty strings");
        out.push_back(c.get<std::string>());
    }
    return out;
}

} // namespace

// vLLM's constraint fields: `structured_outputs: {"json": SCHEMA}` or `{"choice": [...]}` (vLLM
// 0.11+), and the older `guided_json: SCHEMA` and `guided_choice: [...]`. A SCHEMA may also be a
// JSON string holding it. json is response_format json_schema; choice makes the answer exactly
// one of the strings. Two constraints at once, or a kind not built (regex, grammar), are a 400.
void parse_vllm_constraints(const Json& b, ChatJob& job) {
    const Json *schema = nullptr, *choice = nullptr;
    const char* name = "structured_outputs";
    if (const Json* so = field(b, "structured_outputs")) {
        if (!so->is_object()) bad_param(name, "'structured_outputs' must be an object");
        // Options such as disable_any_whitespace are ignored.
        for (const char* kind : {"regex", "grammar", "structural_tag"})
            if (const Json* v = field(*so, kind); v && !v->is_null())
                bad_param(name, std::string("structured_outputs.") + kind +
                                    " is not supported (json and choice are)");
        schema = field(*so, "json");
        choice = field(*so, "choice");
        if (schema && schema->is_null()) schema = nullptr;
        if (choice && choice->is_null()) choice = nullptr;
    }
    for (const char* other : {"guided_regex", "guided_grammar"})
        if (field(b, other)) bad_param(other, std::string("'") + other + "' is not supported");
    int given = (schema != nullptr) + (choice != nullptr);
    if (const Json* gj = field(b, "guided_json")) name = "guided_json", schema = gj, ++given;
    if (const Json* gc = field(b, "guided_choice")) name = "guided_choice", choice = gc, ++given;
    if (given == 0) return;
    if (given > 1 || job.format != ChatJob::Format::Text)
        bad_param(name, "give one of response_format, guided_json, guided_choice and "
                        "structured_outputs");
    if (choice) {
        job.format = ChatJob::Format::Choice;
        job.choices = parse_choices(*choice, name);
        return;
    }
    Json parsed = *schema;
    if (schema->is_string()) {
        try {
            parsed = Json::parse(schema->get<std::string>());
        } catch (const Json::exception&) {
            bad_param(name, std::string("'") + name + "' holds a string that is not JSON");
        }
    }
    if (!(parsed.is_object() || parsed.is_boolean()))
        bad_param(name, std::string("'") + name + "' must be a JSON schema");
    job.format = ChatJob::Format::JsonSchema;
    job.schema = nlohmann::ordered_json::parse(parsed.dump());
}

std::vector<int32_t> token_id_list(const Json& b, const char* name, bool non_empty) {
    const Json* ids = field(b, name);
    if (!ids || ids->is_null()) return {};
    if (!ids->is_array() || (non_empty && ids->empty()))
        bad_param(name, std::string("'") + name + "' must be a" + (non_empty ? " non-empty" : "n") +
                            " array of token ids");
    std::vector<int32_t> out;
    for (const auto& id : *ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            bad_param(name, std::string("'") + name + "' must hold token ids");
        out.push_back(int32_t(id.get<int64_t>()));
    }
    return out;
}

void parse_sampling_extras(const Json& b, GenOptions& g) {
    if (const Json* bias = field(b, "logit_bias")) g.sampling.logit_bias = parse_logit_bias(*bias);
    g.sampling.allowed_token_ids = token_id_list(b, "allowed_token_ids", /*non_empty=*/true);
    g.min_tokens = opt_int(b, "min_tokens", 0, INT32_MAX).value_or(0);
    if (auto t = opt_int(b, "truncate_prompt_tokens", -1, INT32_MAX)) {
        if (*t == 0)
            bad_param("truncate_prompt_tokens", "'truncate_prompt_tokens' must be -1 or >= 1");
        g.truncate_prompt_tokens = *t;
    }
}

} // namespace ninfer::server
