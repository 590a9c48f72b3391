// Next-turn warming: when a chat generation ends, the conversation as its follow-up request will
// render it is prefilled into the prefix cache, at the lowest priority and only while no request
// waits, so the next turn is served from the cache through the answer.
//
// Why: a follow-up turn sends the answer back as text inside the whole history. Two things make
// its tokens differ from the tokens that were generated, and exact caching then stops at the
// previous user message: Qwen3.6's template drops past turns' think blocks (the history renders
// the answer without the reasoning that was generated before it), and a sampled answer may be
// split into tokens the tokenizer would not produce from its text. The warm prompt is rendered
// and tokenized exactly as the next request will be (the answer as the assistant message, then a
// user message, or after tool calls the first call's result: text/follow_up.h), cut where that
// message's own text starts; the cache then holds the state at that point (and one token before
// it, in case the next turn's text merges with it).
// Costs a prefill of the answer and the template's turn markers per warmed turn, done ahead of
// the follow-up (the same tokens the follow-up would otherwise compute, moved into the time the
// user reads and types); when the waiting requests fill every free slot nothing is warmed, and
// a waiting warm that an admitted follow-up extends is dropped (scheduler: superseded). Off with
// `ninfer serve --no-warm-next-turn`.
#pragma once

#include <functional>
#include <vector>

#include "server/chat_job.h"
#include "server/generation.h"
#include "server/model_context.h"

namespace ninfer::server {

// The prompt of the warm request for `job` answered by `answer`: the tokens the follow-up
// request's prompt will start with. Empty when the conversation cannot be warmed (media in it,
// a template that does not render the follow-up as an extension, or past the context).
std::vector<int32_t> next_turn_prompt(const ModelContext& m, const ChatJob& job,
                                      const ChoiceResult& answer);

// Submits the warm request of a finished generation when it qualifies: one choice that ended
// normally (stop, length, a stop string), and a free slot beyond the waiting requests. Never
// throws.
void warm_next_turn(const ModelContext& m, const ChatJob& job, const Generation& g);

// warm_next_turn for `job` as a callback (SseJob::done): it keeps a copy of the job; m must
// outlive it (the server's model context does).
std::function<void(const Generation&)> next_turn_warmer(const ModelContext& m, ChatJob job);

} // namespace ninfer::server
