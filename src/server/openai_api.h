// The OpenAI API: /v1/chat/completions and /v1/completions requests translated into jobs
// (every field validated; unsupported ones rejected with 400 naming them), and generation
// results translated into chat.completion / text_completion objects and their stream chunks.
#pragma once

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_job.h"
#include "server/generation.h"
#include "server/media_parts.h"
#include "server/model_context.h"

namespace ninfer::server {

// The served model must be named by `model` (404 otherwise); absent means the served model.
void check_model(const ModelContext& m, const Json& body, ApiStyle style);

ChatJob parse_openai_chat(const Json& body);
CompletionJob parse_openai_completion(const Json& body);
// The text of an OpenAI message content (a string, or an array of text parts).
std::string openai_content_text(const Json& content, const char* where);
// A user message's content: its text, or (with image_url / video_url parts) the content parts
// with each medium normalised (media_parts.h).
Json openai_user_content(const Json& content, const std::string& where);

struct ResponseMeta {
    std::string id;
    int64_t created = 0;
    std::string model;
};

nlohmann::ordered_json openai_usage(const Generation& g);
// finish_reason of a choice ("stop", "length", "tool_calls").
const char* openai_finish(const ChoiceResult& r, bool tool_calls);

nlohmann::ordered_json openai_chat_response(const ResponseMeta& meta, const Generation& g,
                                            const ChatJob& job, const text::Tokenizer& tok);
nlohmann::ordered_json openai_completion_response(const ResponseMeta& meta, const Generation& g,
                                                  const CompletionJob& job,
                                                  const std::vector<std::string>& prompt_texts,
                                                  const text::Tokenizer& tok);

// Stream chunks (the JSON of each `data:` line).
class OpenAIStream {
public:
    OpenAIStream(ResponseMeta meta, bool chat, const GenOptions& gen, bool parallel_tool_calls,
                 const text::Tokenizer& tok, int choices);
    std::vector<nlohmann::ordered_json> start(const std::vector<std::string>& echo);
    std::vector<nlohmann::ordered_json> events(const std::vector<ChoiceEvent>& events);
    // The usage chunk when stream_options.include_usage (null otherwise).
    nlohmann::ordered_json usage_chunk(const Generation& g) const;

private:
    nlohmann::ordered_json chunk(nlohmann::ordered_json choice) const;
    ResponseMeta meta_;
    bool chat_;
    bool include_usage_;
    bool parallel_;
    const text::Tokenizer* tok_;
    std::vector<int> calls_;          // tool calls seen per choice
    std::vector<size_t> text_offset_; // completions logprobs text_offset per choice
};

} // namespace ninfer::server
