// The Anthropic Messages API: /v1/messages and /v1/messages/count_tokens requests translated
// into chat jobs (system, text/thinking/tool_use/tool_result blocks, tools, tool_choice,
// thinking, stop_sequences, output_config.format), and results into Message objects and the
// streaming event sequence (message_start, ping, content_block_start/delta/stop for thinking,
// text and tool_use blocks, message_delta, message_stop).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/chat_job.h"
#include "server/generation.h"

namespace ninfer::server {

// With `for_count`, max_tokens is not required (count_tokens).
ChatJob parse_anthropic(const Json& body, bool for_count);

// stop_reason of a result: end_turn, max_tokens, stop_sequence or tool_use.
const char* anthropic_stop_reason(const ChoiceResult& r, bool tool_use);

nlohmann::ordered_json anthropic_response(const std::string& id, const std::string& model,
                                          const Generation& g, const ChatJob& job);

// One SSE event: its name and data.
using SseEvent = std::pair<std::string, nlohmann::ordered_json>;

class AnthropicStream {
public:
    AnthropicStream(std::string id, std::string model, bool parallel_tool_use);
    // message_start counts the whole prompt as input_tokens (the engine has not looked the
    // prefix cache up yet); message_delta carries the final usage, cache reads split off, as
    // Anthropic's cumulative message_delta usage does.
    std::vector<SseEvent> start(int input_tokens);
    std::vector<SseEvent> events(const std::vector<ChoiceEvent>& events);
    std::vector<SseEvent> finish(const Generation& g);

private:
    void open(std::vector<SseEvent>& out, const std::string& type, nlohmann::ordered_json block);
    void close(std::vector<SseEvent>& out);
    void delta(std::vector<SseEvent>& out, nlohmann::ordered_json d);
    std::string id_, model_;
    bool parallel_;
    int index_ = -1;   // index of the open block (-1: none yet)
    std::string open_; // type of the open block ("": none)
    int call_ = -1;    // tool call index of an open tool_use block
    bool tool_use_ = false;
};

} // namespace ninfer::server
