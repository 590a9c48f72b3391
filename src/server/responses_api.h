// The OpenAI Responses API (POST /v1/responses), as vLLM and SGLang serve it: the request (input
// text or items, instructions, function tools and their calls and outputs, reasoning.effort,
// text.format, sampling) is translated into the equivalent chat completions body and parsed by
// the chat translator, so both APIs validate and generate alike; results become Response objects
// and the documented stream events (response.created, ... output_item / content_part /
// output_text / reasoning_text / function_call_arguments ..., response.completed or
// response.incomplete), each with its sequence_number. Responses are kept (`store`, true by
// default) in the server's ResponseStore, so `previous_response_id` continues one
// (routes_responses.cpp); `conversation` and `background` are a 400.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/chat_job.h"
#include "server/generation.h"

namespace ninfer::server {

// The chat completions body a Responses body means (400 naming the Responses field otherwise).
Json responses_to_chat(const Json& body);
ChatJob parse_responses(const Json& body);

// Ids of the output items of one response, assigned as they appear.
struct ResponseItemIds {
    std::string reasoning, message;
    std::vector<std::string> calls;
};

struct ResponseEcho {
    std::string id, model;
    int64_t created_at = 0;
    Json request; // the client's body: instructions, tools, tool_choice, text, ... are echoed
    bool stored = false; // the response is kept (its "store")
};

// The Response object. `in_progress`: the opening object of a stream (no output yet).
nlohmann::ordered_json responses_object(const ResponseEcho& echo, const Generation* g,
                                        const ChatJob& job, ResponseItemIds& ids,
                                        bool in_progress);

using ResponsesEvent = std::pair<std::string, nlohmann::ordered_json>; // event name, data

class ResponsesStream {
public:
    ResponsesStream(ResponseEcho echo, ChatJob job);
    std::vector<ResponsesEvent> start();
    std::vector<ResponsesEvent> events(const std::vector<ChoiceEvent>& events);
    std::vector<ResponsesEvent> finish(const Generation& g);
    ResponsesEvent error(int status, const std::string& message, const std::string& param);
    // The Response object that finish() sent (null before).
    const nlohmann::ordered_json& final_response() const { return final_; }

private:
    ResponsesEvent event(const std::string& type, nlohmann::ordered_json data);
    void open(std::vector<ResponsesEvent>& out, const std::string& kind);
    void close(std::vector<ResponsesEvent>& out);
    ResponseEcho echo_;
    ChatJob job_;
    ResponseItemIds ids_;
    int seq_ = 0;
    int output_index_ = -1;
    std::string open_; // "reasoning", "message", "function_call" or "" (none open)
    std::string text_; // the open item's text (reasoning, message) or arguments
    int call_ = -1;    // the open function call's index
    nlohmann::ordered_json call_item_;
    nlohmann::ordered_json final_;
};

} // namespace ninfer::server
