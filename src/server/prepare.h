// From an API-neutral job to what the engine runs: the chat template rendered (tools, thinking
// switch, continuation of a final assistant message), token ids, the context-length check, the
// finite default max_tokens, the output parser's options and the token constraint (forced tool
// calls for tool_choice required/named, JSON output, a reasoning budget).
#pragma once

#include <string>
#include <vector>

#include "server/chat_job.h"
#include "server/generation.h"
#include "server/model_context.h"

namespace ninfer::server {

// The prompt text of a chat job (422 when the template rejects the messages).
std::string render_chat(const ModelContext& m, const ChatJob& job);

struct PreparedChat {
    GenerationSpec spec;
    std::string prompt_text;
};
// `id_prefix` starts the tool call ids (call_<random>_ / toolu_<random>_).
PreparedChat prepare_chat(const ModelContext& m, const ChatJob& job, const std::string& id_prefix);

struct PreparedCompletion {
    GenerationSpec spec;
    std::vector<std::string> prompt_texts; // for echo
};
PreparedCompletion prepare_completion(const ModelContext& m, const CompletionJob& job);

// Reasoning budgets. A job's own budget (thinking.budget_tokens, reasoning_effort) or else the
// server's default (-1: unlimited). With structured output (a forced tool call or
// response_format) the reasoning may use at most max_tokens minus a reserve for the answer:
// half of max_tokens, at most kStructuredReserveMax tokens (a tool call or JSON answer of usual
// size fits in a few hundred tokens; the rest of a large max_tokens stays for reasoning, and a
// small max_tokens is split evenly), and for a forced tool call at least the shortest call's
// tokens plus kAnswerSlack (the tool-call constraint closes the call within what is left), so
// a structured request never comes back empty because reasoning used up max_tokens.
constexpr int kStructuredReserveMax = 1024;
constexpr int kAnswerSlack = 48;
int structured_reserve(int max_tokens);
// The budget the constraint forces </think> at (-1: unlimited) for `max_tokens` new tokens;
// `answer_min`: the fewest tokens of the forced answer (0: not known).
int reasoning_budget(const ModelContext& m, const ChatJob& job, int max_tokens,
                     int answer_min = 0);

// A random hex string of `n` characters (ids of responses and tool calls).
std::string random_hex(int n);

} // namespace ninfer::server
