// One API request's generation on the Engine: n choices (per prompt) submitted as independent
// requests, read with short waits so the caller can write SSE events, send keep-alives and
// notice a disconnected client between reads. Each choice's tokens go through the streaming
// detokenizer and the output parser (stop strings, reasoning, tool calls); a matched stop
// string cancels the engine request at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/engine.h"
#include "text/output_parser.h"
#include "text/stop_matcher.h"
#include "text/tokenizer.h"

namespace ninfer::server {

enum class Finish { None, Stop, Length, StopString, Cancelled, Error };

struct GenerationSpec {
    std::vector<std::vector<int32_t>> prompts; // one or more prompts (completions batches)
    int n = 1;                                 // choices per prompt
    GenerationRequest base;                    // sampling, max_new_tokens, stop ids, logprobs
    text::ParserOptions parser;
    bool raw_text = false; // completions: the text as generated, only stop strings applied
    bool logprobs = false; // report the tokens of each event (for logprobs)
    // Makes the token constraint of one choice (null: unconstrained).
    std::function<std::shared_ptr<TokenConstraint>()> constraint;
};

// What one choice produced since the last poll.
struct ChoiceEvent {
    int index = 0;
    text::ParsedDelta delta;
    std::vector<GeneratedToken> tokens; // when spec.logprobs: the tokens behind the delta
    Finish finish = Finish::None;       // set on the choice's last event
    std::string stop_string;            // with Finish::StopString
    std::string error;                  // with Finish::Error
};

struct ChoiceResult {
    std::string content, reasoning;
    std::vector<text::ToolCall> tool_calls;
    std::vector<GeneratedToken> tokens; // when spec.logprobs
    Finish finish = Finish::None;
    std::string stop_string, error;
    int completion_tokens = 0, reasoning_tokens = 0;
    RequestTimings timings;
};

class Generation {
public:
    // Submits every choice; engine validation errors raise ninfer::Error. With `on_tokens`,
    // every batch of tokens read is reported (count, seconds since the previous batch of the
    // same choice; first batch: -1) for inter-token metrics.
    Generation(Engine& engine, const text::Tokenizer& tokenizer, GenerationSpec spec,
               std::function<void(int, double)> on_tokens = {});
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    // Waits up to `wait` for progress and appends the events. Returns false once every choice
    // has finished and its last event was returned.
    bool poll(std::chrono::milliseconds wait, std::vector<ChoiceEvent>& events);
    // Stops every choice (client gone, shutdown); they finish with Finish::Cancelled.
    void cancel();
    bool finished() const;

    int choices() const { return int(choices_.size()); }
    const ChoiceResult& result(int index) const;
    int prompt_tokens() const; // over the prompts (not multiplied by n)
    // Prompt tokens served from the prefix cache, counted as prompt_tokens is: per prompt the
    // least over its n choices (RequestTimings::cached_tokens), summed over the prompts.
    int cached_tokens() const;
    // Speculative decoding counters summed over the choices.
    SpeculativeStats speculative() const;
    int completion_tokens() const;
    int reasoning_tokens() const;
    double ttft_s() const; // submit to the first token of any choice (-1: none yet)

private:
    struct Choice;
    bool drain(Choice& c, RequestStream::Wait w, RequestUpdate& u,
               std::vector<ChoiceEvent>& events);
    GenerationSpec spec_;
    const text::Tokenizer* tokenizer_;
    std::vector<std::unique_ptr<Choice>> choices_;
    std::vector<int32_t> stop_ids_;
    std::function<void(int, double)> on_tokens_;
    std::chrono::steady_clock::time_point start_;
    double ttft_s_ = -1;
    bool cancelled_ = false;
};

// Merges `more` into `into` (text appended, tool call deltas kept in order).
void append_delta(text::ParsedDelta& into, text::ParsedDelta more);

} // namespace ninfer::server
