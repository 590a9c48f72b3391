// What next-turn warming needs from the text layer (the server's warm_turn.h and `ninfer chat`):
// an answer as the assistant message a client sends back, and the tokens that every follow-up
// turn of a conversation starts with.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/output_parser.h"

namespace ninfer::text {

// {"role": "assistant", "content", "reasoning_content" (when not empty), "tool_calls" (when
// any: id, type, function {name, arguments as a JSON object})}: the message form the chat
// templates take, as the server normalises a client's assistant message.
nlohmann::ordered_json assistant_message(const std::string& content, const std::string& reasoning,
                                         const std::vector<ToolCall>& tool_calls);

// The message a follow-up of `messages` most likely starts with, without its content: after an
// answer with tool calls, the result of the first call ({"role": "tool", "tool_call_id"}, as
// agent loops send it); otherwise a user message.
nlohmann::ordered_json next_message_kind(const nlohmann::ordered_json& messages);

// The tokens every follow-up of `messages` starts with: the messages with one more message of
// next_message_kind, rendered and tokenized by tokens_of (the caller's template, tools,
// variables and generation prompt), twice, with contents that differ from their first character
// on; their common prefix. A follow-up diverges from it only inside that message's own text, so
// the prefix ends where the text starts (or one token before, where the text merges with the
// template's tokens).
std::vector<int32_t> follow_up_prefix(
    nlohmann::ordered_json messages,
    const std::function<std::vector<int32_t>(const nlohmann::ordered_json&)>& tokens_of);

} // namespace ninfer::text
