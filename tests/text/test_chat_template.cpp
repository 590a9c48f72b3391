// Chat templates: the tests' Qwen3.6 template renders the exact strings MODEL_QWEN3_5.md section 5
// specifies; model directories provide templates through tokenizer_config.json.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "ninfer/error.h"
#include "text/chat_template.h"
#include "text/follow_up.h"

using ninfer::text::ChatOptions;
using ninfer::text::ChatTemplate;
using json = nlohmann::ordered_json;

namespace {

ChatTemplate qwen36() {
    std::ifstream in(std::string(NINFER_TEXT_TEMPLATES) + "/qwen3_6.jinja");
    std::stringstream s;
    s << in.rdbuf();
    return ChatTemplate(s.str());
}

} // namespace

TEST(ChatTemplate, GenerationPromptOpensThinking) {
    const auto msgs = json::parse(R"([{"role": "system", "content": " Be brief. "},
                                      {"role": "user", "content": "Hi"}])");
    EXPECT_EQ(qwen36().render(msgs, nullptr),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n");
    ChatOptions off;
    off.variables["enable_thinking"] = false;
    EXPECT_TRUE(qwen36()
                    .render(msgs, nullptr, off)
                    .ends_with("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(ChatTemplate, ToolCallsAndResponses) {
    const auto msgs = json::parse(R"([{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
          {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
        {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "warm"}])");
    const std::string out = qwen36().render(msgs, nullptr);
    EXPECT_NE(
        out.find(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n"
            "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n[1, 2]\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>\n"),
        std::string::npos)
        << out;
    EXPECT_NE(
        out.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n"
                 "warm\n</tool_response><|im_end|>\n"),
        std::string::npos)
        << out;
}

TEST(ChatTemplate, ReasoningOfEarlierTurnsIsDroppedUnlessPreserved) {
    const auto msgs = json::parse(R"([{"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nr1\n</think>\n\nc1"},
        {"role": "user", "content": "b"}])");
    EXPECT_NE(qwen36().render(msgs, nullptr).find("<|im_start|>assistant\nc1<|im_end|>"),
              std::string::npos);
    ChatOptions keep;
    keep.variables["preserve_thinking"] = true;
    EXPECT_NE(qwen36()
                  .render(msgs, nullptr, keep)
                  .find("<|im_start|>assistant\n<think>\nr1\n</think>\n\nc1"),
              std::string::npos);
}

TEST(ChatTemplate, TemplateFileReplacesTheModelsOwn) {
    const std::string dir = std::string(NINFER_TEXT_FIXTURES) + "/tiny_chat";
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "ninfer_test_override.jinja";
    {
        std::ofstream out(file);
        out << "{{ eos_token }}|{{ messages[0].content }}";
    }
    // The file's text, with the model directory's special tokens.
    EXPECT_EQ(ChatTemplate::from_model_dir(dir, file).render(
                  json::parse(R"([{"role": "user", "content": "x"}])"), nullptr),
              "<|im_end|>|x");
    std::filesystem::remove(file);
    EXPECT_THROW(ChatTemplate::from_model_dir(dir, file), ninfer::Error); // gone
    EXPECT_THROW(ChatTemplate::from_model_dir(dir, dir), ninfer::Error);  // a directory
}

TEST(ChatTemplate, ModelDirectoryAndErrors) {
    const ChatTemplate t =
        ChatTemplate::from_model_dir(std::string(NINFER_TEXT_FIXTURES) + "/tiny_chat");
    EXPECT_EQ(t.render(json::parse(R"([{"role": "user", "content": "x"}])"), nullptr),
              "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n");
    EXPECT_THROW(ChatTemplate::from_model_dir("/nonexistent"), ninfer::Error);
    EXPECT_THROW(ChatTemplate("{% for %}"), ninfer::Error);
    EXPECT_THROW(qwen36().render(json::array(), nullptr), ninfer::Error); // "No messages provided."
    EXPECT_THROW(qwen36().render(json::parse(R"([{"role": "bot", "content": "x"}])"), nullptr),
                 ninfer::Error);
}

// Next-turn warming's prefix (text/follow_up.h): with the answer as the last message, the tokens
// every follow-up starts with end where the follow-up's user text starts. The Qwen3.6 template
// drops the answer's reasoning once a user message follows it, so the prefix has the answer
// without its think block, which the rendering of the turn as it was generated had.
TEST(FollowUp, PrefixEndsWhereTheNextUserTextStarts) {
    const ChatTemplate tpl = qwen36();
    json msgs = json::parse(R"([{"role": "user", "content": "Hi"}])");
    msgs.push_back(ninfer::text::assistant_message("Hello!", "The user greets.", {}));
    auto chars = [&](const json& ms) { // a character-level tokenizer: one id a byte
        const std::string text = tpl.render(ms, nullptr);
        return std::vector<int32_t>(text.begin(), text.end());
    };
    const std::vector<int32_t> prefix = ninfer::text::follow_up_prefix(msgs, chars);
    const std::string got(prefix.begin(), prefix.end());
    EXPECT_EQ(got, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                   "<|im_start|>user\n");
    json follow = msgs;
    follow.push_back({{"role", "user"}, {"content", "More?"}});
    const std::vector<int32_t> real = chars(follow);
    ASSERT_GE(real.size(), prefix.size());
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), real.begin()));
    // As generated (the answer last), the turn had its think block: not a prefix of the above.
    const std::string generated = tpl.render(msgs, nullptr, [] {
        ChatOptions o;
        o.add_generation_prompt = false;
        return o;
    }());
    EXPECT_NE(generated.find("The user greets."), std::string::npos);
    EXPECT_EQ(got.find("The user greets."), std::string::npos);
}

TEST(FollowUp, AssistantMessageCarriesToolCallsAsObjects) {
    const json m = ninfer::text::assistant_message(
        "", "", {{"call_1", "get_weather", R"({"city": "Paris"})"}, {"call_2", "f", "not json"}});
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_FALSE(m.contains("reasoning_content"));
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(m["tool_calls"][0]["id"], "call_1");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
    EXPECT_TRUE(m["tool_calls"][1]["function"]["arguments"].is_object());
}

// After an answer with tool calls the follow-up starts with the first call's result (agent
// loops): the prefix then reaches into the tool response's wrapping, and it is a prefix of the
// follow-up that sends the result.
TEST(FollowUp, AfterToolCallsTheToolResultComesNext) {
    const ChatTemplate tpl = qwen36();
    json msgs = json::parse(R"([{"role": "user", "content": "Weather in Paris?"}])");
    msgs.push_back(ninfer::text::assistant_message(
        "", "", {{"call_1", "get_weather", R"({"city": "Paris"})"}}));
    EXPECT_EQ(ninfer::text::next_message_kind(msgs),
              json({{"role", "tool"}, {"tool_call_id", "call_1"}}));
    auto chars = [&](const json& ms) {
        const std::string text = tpl.render(ms, nullptr);
        return std::vector<int32_t>(text.begin(), text.end());
    };
    const std::vector<int32_t> prefix = ninfer::text::follow_up_prefix(msgs, chars);
    const std::string got(prefix.begin(), prefix.end());
    EXPECT_TRUE(got.ends_with("<tool_response>\n")) << got;
    json follow = msgs;
    follow.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}});
    const std::vector<int32_t> real = chars(follow);
    ASSERT_GE(real.size(), prefix.size());
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), real.begin()));
    // A plain answer is followed by a user message.
    json plain = json::parse(R"([{"role": "user", "content": "Hi"}])");
    plain.push_back(ninfer::text::assistant_message("Hello!", "", {}));
    EXPECT_EQ(ninfer::text::next_message_kind(plain), json({{"role", "user"}}));
}
