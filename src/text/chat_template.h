// A model's chat template (Jinja, from chat_template.jinja or tokenizer_config.json) rendered
// the way HF transformers' apply_chat_template renders it: messages, tools (None when absent),
// add_generation_prompt, the special tokens of tokenizer_config.json, and extra keyword
// variables such as enable_thinking and preserve_thinking.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace ninfer::text {

struct ChatOptions {
    bool add_generation_prompt = true;
    nlohmann::ordered_json variables =
        nlohmann::ordered_json::object(); // e.g. {"enable_thinking": false}
};

class ChatTemplate {
public:
    // Parses `source`; a broken template raises ninfer::Error (InvalidArgument) naming the line.
    // `special_tokens` holds bos_token, eos_token, ... as HF passes them (may be empty).
    explicit ChatTemplate(const std::string& source,
                          nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());
    // A template file (no special tokens). Io error when it is not a readable file.
    static ChatTemplate
    from_file(const std::filesystem::path& file,
              nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());
    // DIR/chat_template.jinja, else the chat_template of DIR/tokenizer_config.json (a string, or
    // the entry named "default" of a list). Io error when the directory has none.
    // `template_file`, when given, replaces the model's template (vLLM's --chat-template); the
    // special tokens still come from DIR/tokenizer_config.json. Io error when it is unreadable.
    static ChatTemplate from_model_dir(const std::filesystem::path& dir,
                                       const std::filesystem::path& template_file = {});

    // messages: an OpenAI-style array; tools: an array, or null for none (ordered_json: tool
    // schemas are printed with tojson in their key order). Template errors
    // (raise_exception, undefined access) raise ninfer::Error (InvalidArgument).
    std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       const ChatOptions& options = {}) const;

private:
    struct Impl;
    std::shared_ptr<const Impl> impl_;
};

} // namespace ninfer::text
