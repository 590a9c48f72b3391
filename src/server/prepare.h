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

// A random hex string of `n` characters (ids of responses and tool calls).
std::string random_hex(int n);

} // namespace ninfer::server
