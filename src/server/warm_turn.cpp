#include "server/warm_turn.h"

#include <algorithm>
#include <climits>
#include <exception>

#include "server/media_parts.h"
#include "server/prepare.h"

namespace ninfer::server {
namespace {

// The answer as the next request's normalised assistant message (parse_message's form).
Json assistant_message(const ChoiceResult& answer) {
    Json msg = {{"role", "assistant"}, {"content", answer.content}};
    if (!answer.reasoning.empty()) msg["reasoning_content"] = answer.reasoning;
    if (!answer.tool_calls.empty()) {
        Json calls = Json::array();
        for (const text::ToolCall& c : answer.tool_calls) {
            Json args = Json::parse(c.arguments, nullptr, false);
            if (args.is_discarded() || !args.is_object()) args = Json::object();
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", args}}}});
        }
        msg["tool_calls"] = calls;
    }
    return msg;
}

// The follow-up rendered with a user message `text` after the answer, tokenized.
std::vector<int32_t> follow_up_tokens(const ModelContext& m, ChatJob next, const char* text) {
    next.messages.push_back({{"role", "user"}, {"content", text}});
    return m.tokenizer->encode(render_chat(m, next), true);
}

} // namespace

std::vector<int32_t> next_turn_prompt(const ModelContext& m, const ChatJob& job,
                                      const ChoiceResult& answer) {
    if (!collect_media(job.messages).empty()) return {}; // the warm prompt would need the media
    ChatJob next = job;
    next.add_generation_prompt = true; // the follow-up's own generation prompt comes after
    if (job.continue_final) {
        // The answer continued the final assistant message: the follow-up sends it whole.
        Json& last = next.messages.back();
        const Json merged = assistant_message(answer);
        const Json before = last.value("content", Json(""));
        last["content"] = (before.is_string() ? before.get<std::string>() : "") + answer.content;
        if (merged.contains("tool_calls")) last["tool_calls"] = merged["tool_calls"];
        next.continue_final = false;
    } else {
        next.messages.push_back(assistant_message(answer));
    }
    // Two follow-ups that differ from their user text's first character on: their common
    // tokens are what every follow-up starts with.
    const std::vector<int32_t> a = follow_up_tokens(m, next, "0");
    const std::vector<int32_t> b = follow_up_tokens(m, std::move(next), "1");
    const size_t common =
        size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    const int64_t limit = m.engine->model_info().max_context;
    if (common < 2 || int64_t(common) >= limit) return {};
    return std::vector<int32_t>(a.begin(), a.begin() + int64_t(common));
}

void warm_next_turn(const ModelContext& m, const ChatJob& job, const Generation& g) {
    if (g.choices() != 1) return; // which answer the client keeps is unknown
    const ChoiceResult& r = g.result(0);
    if (r.finish != Finish::Stop && r.finish != Finish::Length && r.finish != Finish::StopString)
        return;
    try {
        // Saturated (the waiting requests fill every free slot): requests first. Otherwise the
        // warm request's lowest priority keeps it behind them, and preemption takes it first.
        const EngineStats st = m.engine->stats();
        if (st.waiting >= st.state_slots_total - st.state_slots_used) return;
        GenerationRequest warm;
        warm.prompt = next_turn_prompt(m, job, r);
        if (warm.prompt.empty()) return;
        warm.max_new_tokens = 0;
        warm.prefill_only = true;
        warm.priority = INT_MAX; // after every request, and preempted first
        m.engine->submit(std::move(warm)); // runs on its own; nobody reads its stream
    } catch (const std::exception&) {
        // Best effort: a follow-up that is not warmed is only slower.
    }
}

std::function<void(const Generation&)> next_turn_warmer(const ModelContext& m, ChatJob job) {
    const ModelContext* model = &m;
    return [model, job = std::move(job)](const Generation& g) { warm_next_turn(*model, job, g); };
}

} // namespace ninfer::server
