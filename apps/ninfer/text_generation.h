// Text generation for the CLI (run --prompt/--messages, chat) on the public Engine API: render
// the conversation with the model's chat template, tokenize, generate, and stream the answer
// to stdout and the reasoning to stderr through the streaming detokenizer and output parser.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/preprocess.h"
#include "messages_file.h"
#include "ninfer/engine.h"
#include "template_vars.h"
#include "text/chat_template.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"

namespace ninfer::app {

struct TextOptions {
    std::string prompt;               // --prompt: one user message
    std::string messages_file;        // --messages: OpenAI-style messages (+ tools)
    std::string system;               // --system: a system message put first
    std::vector<std::string> images;  // --image: files for the --prompt message
    std::vector<std::string> videos;  // --video
    std::string chat_template;        // --chat-template: a Jinja file replacing the model's
    TemplateVarOptions template_vars; // --no-thinking, --reasoning-effort, --var
    std::vector<std::string> stop;    // stop strings
    bool hide_reasoning = false;
    bool print_token_ids = false; // generated ids to stderr
};

// A model with its tokenizer and chat template, loaded once.
struct TextModel {
    // `chat_template_file` (may be empty) replaces the model's own template.
    TextModel(const EngineOptions& options, const std::string& chat_template_file);
    Engine engine;
    text::Tokenizer tokenizer;
    text::ChatTemplate chat_template;
    std::shared_ptr<const media::VisionPreprocessConfig> vision; // null: no vision tower
};

struct TurnResult {
    std::string content;
    std::string reasoning;
    std::vector<text::ToolCall> tool_calls;
    FinishReason reason = FinishReason::None;
    std::string error;
    RequestTimings timings;
};

// Renders `conversation`, generates with `request` (its prompt is replaced) and streams the
// output. `cancel`, when set by another thread or a signal handler, stops the answer.
TurnResult generate_turn(TextModel& model, const Conversation& conversation,
                         const TextOptions& options, GenerationRequest request,
                         const std::atomic<bool>* cancel);

// Next-turn warming for `ninfer chat` (as the server's warm_turn.h): the tokens every follow-up
// of `conversation` (its last message the answer) starts with are prefilled into the prefix
// cache at the lowest priority while the user types. Not for conversations with media. Never
// throws.
void warm_next_turn(TextModel& model, const Conversation& conversation, const TextOptions& options);

// The tokens `conversation` renders to (its text; media placeholders count one token each).
int64_t rendered_prompt_tokens(TextModel& model, const Conversation& conversation,
                               const TextOptions& options);

// The conversation of --prompt/--messages/--system.
Conversation build_conversation(const TextOptions& options);

// The statistics line on stderr: prompt tokens (and how many the prefix cache served),
// generated tokens, finish reason, prefill and decode tok/s, TTFT.
void print_generation_stats(const RequestTimings& t, FinishReason reason);

// ninfer run with --prompt or --messages. Returns the exit status.
int run_text(const EngineOptions& engine, const TextOptions& options, GenerationRequest request);

} // namespace ninfer::app

namespace CLI {
class App;
}

namespace ninfer::app {
// --prompt, --messages, --system, the template variables, --stop, --hide-reasoning on a
// subcommand.
void add_text_options(CLI::App& app, TextOptions& o);
} // namespace ninfer::app
