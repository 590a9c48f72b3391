#include "server/prepare.h"

#include <algorithm>
#include <random>

#include "ninfer/error.h"
#include "server/api_error.h"
#include "server/constraints.h"
#include "server/media_parts.h"

#include "text/json_constraint.h"
#include "text/tool_call_constraint.h"

namespace ninfer::server {
namespace {

// Marks where a continued assistant message ends in the rendered prompt.
constexpr const char* kContinueMarker = "<ninfer-continue-final-message>";

// truncate_prompt_tokens (vLLM's): each prompt keeps its last N tokens (-1: as many as leave one
// token of room in the context). Returns which prompts were cut.
std::vector<bool> truncate_prompts(const ModelContext& m, const GenOptions& g,
                                   std::vector<std::vector<int32_t>>& prompts) {
    std::vector<bool> cut(prompts.size(), false);
    if (!g.truncate_prompt_tokens) return cut;
    const int64_t keep = *g.truncate_prompt_tokens < 0 ? m.engine->model_info().max_context - 1
                                                       : *g.truncate_prompt_tokens;
    for (size_t i = 0; i < prompts.size(); ++i) {
        auto& ids = prompts[i];
        if (int64_t(ids.size()) <= keep) continue;
        ids.erase(ids.begin(), ids.end() - keep);
        cut[i] = true;
    }
    return cut;
}

// `prompt_param` names the field that holds the prompt (messages, prompt) in errors.
void apply_gen_options(const ModelContext& m, const GenOptions& g, int64_t longest_prompt,
                       GenerationSpec& spec, const char* prompt_param) {
    const int64_t context = m.engine->model_info().max_context;
    if (longest_prompt >= context)
        throw ApiError(400,
                       "the prompt has " + std::to_string(longest_prompt) +
                           " tokens; the model's context holds " + std::to_string(context),
                       prompt_param, "context_length_exceeded");
    const int64_t room = context - longest_prompt;
    const int64_t wanted = g.max_tokens ? *g.max_tokens : m.default_max_tokens;
    spec.base.max_new_tokens = int(std::min(wanted, room));
    if (g.min_tokens > wanted)
        bad_param("min_tokens", "'min_tokens' (" + std::to_string(g.min_tokens) +
                                    ") must not exceed max_tokens (" + std::to_string(wanted) + ")");
    spec.base.min_new_tokens = int(std::min<int64_t>(g.min_tokens, spec.base.max_new_tokens));
    spec.base.sampling = resolve_sampling(g.sampling, m.defaults);
    spec.base.stop_token_ids = g.stop_token_ids;
    spec.base.ignore_eos = g.ignore_eos;
    spec.base.priority = g.priority;
    spec.base.top_logprobs = g.logprobs ? g.top_logprobs : 0;
    spec.logprobs = g.logprobs;
    spec.n = g.n;
    spec.parser.stop = g.stop;
    // A 400 naming `param` unless `id` is a token of the model.
    const auto require_token = [&](int32_t id, const char* param, const char* what) {
        if (id < 0 || id >= m.engine->model_info().token_limit)
            bad_param(param, std::string(what) + " " + std::to_string(id) + " is not a token");
    };
    for (int32_t id : g.stop_token_ids) require_token(id, "stop_token_ids", "stop token id");
    for (const auto& [id, bias] : g.sampling.logit_bias)
        require_token(id, "logit_bias", "logit_bias token id");
    for (int32_t id : g.sampling.allowed_token_ids)
        require_token(id, "allowed_token_ids", "allowed token id");
}

std::vector<int32_t> encode(const ModelContext& m, const std::string& text) {
    return m.tokenizer->encode(text, true);
}

// The JSON grammar of response_format; `end_ids` may end the output once the value is complete.
std::shared_ptr<TokenConstraint> json_tail(const ModelContext& m, const ChatJob& job,
                                           const std::vector<int32_t>& end_ids) {
    try {
        return text::make_json_constraint(
            job.format == ChatJob::Format::JsonSchema ? job.schema : nlohmann::ordered_json(),
            *m.tokenizer, end_ids);
    } catch (const Error& e) {
        throw ApiError(400, std::string("response_format: ") + e.what(), "response_format");
    }
}

// After a guided choice: only the end of the answer.
class EndOnlyConstraint final : public TokenConstraint {
public:
    explicit EndOnlyConstraint(std::vector<int32_t> end_ids) : end_ids_(std::move(end_ids)) {}
    void allowed(std::vector<uint8_t>& mask) override {
        for (int32_t id : end_ids_)
            if (id >= 0 && size_t(id) < mask.size()) mask[size_t(id)] = 1;
    }
    void accept(int32_t) override {}

private:
    std::vector<int32_t> end_ids_;
};

bool forces_tool(const ChatJob& job) {
    return job.tool_choice.kind == ToolChoice::Kind::Required ||
           job.tool_choice.kind == ToolChoice::Kind::Named;
}

// The tools a forced call may name.
nlohmann::ordered_json forced_tools(const ChatJob& job) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& tool : job.tools)
        if (job.tool_choice.kind == ToolChoice::Kind::Required ||
            tool["function"]["name"].get<std::string>() == job.tool_choice.name)
            out.push_back(nlohmann::ordered_json::parse(tool.dump()));
    return out;
}

// The whole tool call of tool_choice required/named (text/tool_call_constraint.h).
std::shared_ptr<TokenConstraint> tool_tail(const ModelContext& m,
                                           const nlohmann::ordered_json& tools, bool parallel,
                                           const std::vector<int32_t>& end_ids,
                                           const std::string& lead, int tokens_left) {
    text::ToolCallConstraintOptions o;
    o.parallel = parallel;
    o.lead = lead;
    o.max_tokens = std::max(tokens_left, 1);
    try {
        return text::make_tool_call_constraint(tools, *m.tokenizer, end_ids, o);
    } catch (const Error& e) {
        throw ApiError(400, std::string("tools: ") + e.what(), "tools");
    }
}

} // namespace

int reasoning_budget(const ModelContext& m, const ChatJob& job, int max_tokens, int answer_min) {
    int budget = job.reasoning_budget ? *job.reasoning_budget : m.default_reasoning_budget;
    if (forces_tool(job) || job.format != ChatJob::Format::Text) {
        const int reserve =
            std::min(max_tokens, std::max(structured_reserve(max_tokens),
                                          answer_min > 0 ? answer_min + kAnswerSlack : 0));
        const int room = std::max(0, max_tokens - reserve);
        budget = budget < 0 ? room : std::min(budget, room);
    }
    return budget;
}

int structured_reserve(int max_tokens) {
    return std::min(kStructuredReserveMax, max_tokens / 2);
}

namespace {

// The constraint plan of a chat job: forced tool call, JSON output, reasoning budget.
ConstraintPlan constraint_plan(const ModelContext& m, const ChatJob& job, bool in_reasoning,
                               const std::vector<int32_t>& stop_ids, int max_tokens) {
    ConstraintPlan plan;
    plan.starts_in_reasoning = in_reasoning;
    plan.max_tokens = max_tokens;
    plan.stop_ids = stop_ids;
    int answer_min = 0;
    if (forces_tool(job)) {
        const ModelContext* mc = &m;
        const auto tools = forced_tools(job);
        const bool parallel = job.parallel_tool_calls;
        // Built once up front so that schema errors are a 400 before anything runs.
        (void)tool_tail(m, tools, parallel, stop_ids, "", max_tokens);
        text::ToolCallConstraintOptions o;
        o.lead = "\n</think>\n\n";
        answer_min = text::min_tool_call_tokens(tools, *m.tokenizer, stop_ids, o);
        plan.tool_tail = [mc, tools, parallel, stop_ids](const std::string& lead, int left) {
            return tool_tail(*mc, tools, parallel, stop_ids, lead, left);
        };
    } else if (job.format == ChatJob::Format::Choice) {
        plan.literals = job.choices;
        plan.tail = std::make_shared<EndOnlyConstraint>(stop_ids);
    } else if (job.format != ChatJob::Format::Text) {
        plan.tail = json_tail(m, job, stop_ids);
    }
    plan.reasoning_budget = in_reasoning ? reasoning_budget(m, job, max_tokens, answer_min) : -1;
    return plan;
}

} // namespace

std::string random_hex(int n) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) s += digits[rng() & 15];
    return s;
}

std::string render_chat(const ModelContext& m, const ChatJob& job) {
    text::ChatOptions opt;
    opt.variables = m.template_defaults;
    opt.variables.update(job.template_vars); // the request's own settings win
    opt.add_generation_prompt = job.add_generation_prompt;
    const Json tools = job.tool_choice.kind == ToolChoice::Kind::None ? Json() : job.tools;
    try {
        if (!job.continue_final) return m.chat_template->render(job.messages, tools, opt);
        Json messages = job.messages;
        Json& last = messages.back();
        const Json content = last.value("content", Json(""));
        if (!content.is_string() && !content.is_null())
            bad_param("messages", "the final assistant message to continue must have text content");
        last["content"] = (content.is_string() ? content.get<std::string>() : "") + kContinueMarker;
        opt.add_generation_prompt = false;
        const std::string text = m.chat_template->render(messages, tools, opt);
        const size_t at = text.rfind(kContinueMarker);
        if (at == std::string::npos)
            throw ApiError(422, "the chat template does not show the final assistant message, "
                                "so it cannot be continued");
        return text.substr(0, at);
    } catch (const Error& e) {
        throw ApiError(422, std::string("the chat template rejected the messages: ") + e.what(),
                       "messages");
    }
}

// Where the generation prompt starts (the last <|im_start|>): the prefix-cache boundary of a
// chat request, since a follow-up turn renders the answer from there (Qwen's templates drop or
// rewrite the turn's think block, and re-tokenized text need not match the sampled ids).
static int generation_prompt_start(const ModelContext& m, const std::vector<int32_t>& ids) {
    const std::optional<int32_t> start = m.tokenizer->token_id("<|im_start|>");
    if (!start) return 0;
    for (size_t i = ids.size(); i-- > 1;)
        if (ids[i] == *start) return int(i);
    return 0;
}

PreparedChat prepare_chat(const ModelContext& m, const ChatJob& job, const std::string& id_prefix) {
    PreparedChat p;
    p.prompt_text = render_chat(m, job);
    p.spec.prompts.push_back(encode(m, p.prompt_text));
    const std::vector<MediaRef> refs = collect_media(job.messages);
    if (truncate_prompts(m, job.gen, p.spec.prompts)[0] && !refs.empty())
        bad_param("truncate_prompt_tokens", "a prompt with images or videos cannot be truncated");
    if (!refs.empty()) {
        LoadedMedia media = load_media(m, refs);
        lay_out_media(m.engine->model_info(), *m.tokenizer, p.spec.prompts[0], media);
        p.spec.base.media = std::move(media.inputs);
    }
    apply_gen_options(m, job.gen, int64_t(p.spec.prompts[0].size()), p.spec, "messages");
    p.spec.base.cache_boundary = generation_prompt_start(m, p.spec.prompts[0]);
    text::ParserOptions& po = p.spec.parser;
    po.starts_in_reasoning = text::prompt_opens_reasoning(p.prompt_text);
    po.parse_tool_calls = job.tools.is_array() && !job.tools.empty() &&
                          job.tool_choice.kind != ToolChoice::Kind::None;
    if (po.parse_tool_calls) po.tools = job.tools;
    po.id_prefix = id_prefix;
    std::vector<int32_t> stop_ids = p.spec.base.stop_token_ids;
    if (!job.gen.ignore_eos)
        for (int32_t id : m.engine->model_info().eos_token_ids) stop_ids.push_back(id);
    ConstraintPlan plan =
        constraint_plan(m, job, po.starts_in_reasoning, stop_ids, p.spec.base.max_new_tokens);
    if (plan.active()) {
        const text::Tokenizer* tok = m.tokenizer;
        p.spec.constraint = [tok, plan] { return make_plan_constraint(*tok, plan); };
        if (plan.tail && job.format != ChatJob::Format::Choice) { // (EndOnly is stateless)
            // The grammar holds per-request state: each choice needs its own.
            const ModelContext* mc = &m;
            const ChatJob copy = job;
            p.spec.constraint = [tok, plan, mc, copy, stop_ids] {
                ConstraintPlan own = plan;
                own.tail = json_tail(*mc, copy, stop_ids);
                return make_plan_constraint(*tok, own);
            };
        }
    }
    return p;
}

PreparedCompletion prepare_completion(const ModelContext& m, const CompletionJob& job) {
    PreparedCompletion p;
    int64_t longest = 0;
    for (const auto& text : job.prompts) {
        p.prompt_texts.push_back(text);
        p.spec.prompts.push_back(encode(m, text));
    }
    for (const auto& ids : job.prompt_ids) {
        for (int32_t id : ids)
            if (id < 0 || id >= m.tokenizer->vocab_size())
                bad_param("prompt", "prompt token id " + std::to_string(id) + " is not a token");
        p.prompt_texts.push_back(m.tokenizer->decode(ids));
        p.spec.prompts.push_back(ids);
    }
    const std::vector<bool> cut = truncate_prompts(m, job.gen, p.spec.prompts);
    for (size_t i = 0; i < cut.size(); ++i)
        if (cut[i]) p.prompt_texts[i] = m.tokenizer->decode(p.spec.prompts[i]); // echo: what ran
    for (const auto& ids : p.spec.prompts) {
        if (ids.empty()) bad_param("prompt", "the prompt is empty");
        longest = std::max<int64_t>(longest, int64_t(ids.size()));
    }
    apply_gen_options(m, job.gen, longest, p.spec, "prompt");
    p.spec.parser.parse_tool_calls = false;
    p.spec.raw_text = true;
    return p;
}

} // namespace ninfer::server
