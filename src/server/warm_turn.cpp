#include "server/warm_turn.h"

#include <climits>
#include <exception>

#include "server/media_parts.h"
#include "server/prepare.h"
#include "text/follow_up.h"

namespace ninfer::server {

std::vector<int32_t> next_turn_prompt(const ModelContext& m, const ChatJob& job,
                                      const ChoiceResult& answer) {
    if (!collect_media(job.messages).empty()) return {}; // the warm prompt would need the media
    const Json reply = text::assistant_message(answer.content, answer.reasoning,
                                               answer.tool_calls);
    ChatJob next = job;
    next.add_generation_prompt = true; // the follow-up's own generation prompt comes after
    next.continue_final = false;
    if (job.continue_final) {
        // The answer continued the final assistant message: the follow-up sends it whole.
        Json& last = next.messages.back();
        const Json before = last.value("content", Json(""));
        last["content"] = (before.is_string() ? before.get<std::string>() : "") + answer.content;
        if (reply.contains("tool_calls")) last["tool_calls"] = reply["tool_calls"];
    } else {
        next.messages.push_back(reply);
    }
    const std::vector<int32_t> prefix = text::follow_up_prefix(next.messages, [&](const Json& ms) {
        ChatJob rendered = next;
        rendered.messages = ms;
        return m.tokenizer->encode(render_chat(m, rendered), true);
    });
    if (prefix.size() < 2 || int64_t(prefix.size()) >= m.engine->model_info().max_context)
        return {};
    return prefix;
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
