#include "text/follow_up.h"

#include <algorithm>

namespace ninfer::text {

nlohmann::ordered_json assistant_message(const std::string& content, const std::string& reasoning,
                                         const std::vector<ToolCall>& tool_calls) {
    nlohmann::ordered_json msg = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
        msg["tool_calls"] = nlohmann::ordered_json::array();
        for (const ToolCall& c : tool_calls) {
            nlohmann::ordered_json call = openai_tool_call(c);
            auto args = nlohmann::ordered_json::parse(c.arguments, nullptr, false);
            call["function"]["arguments"] =
                args.is_object() ? args : nlohmann::ordered_json::object();
            msg["tool_calls"].push_back(call);
        }
    }
    return msg;
}

nlohmann::ordered_json next_message_kind(const nlohmann::ordered_json& messages) {
    if (!messages.empty()) {
        const auto& last = messages.back();
        const auto calls = last.find("tool_calls");
        if (last.value("role", "") == "assistant" && calls != last.end() && calls->is_array() &&
            !calls->empty()) {
            nlohmann::ordered_json tool = {{"role", "tool"}};
            const auto& first = calls->front();
            if (first.contains("id") && first["id"].is_string()) tool["tool_call_id"] = first["id"];
            return tool;
        }
    }
    return {{"role", "user"}};
}

std::vector<int32_t> follow_up_prefix(
    nlohmann::ordered_json messages,
    const std::function<std::vector<int32_t>(const nlohmann::ordered_json&)>& tokens_of) {
    nlohmann::ordered_json next = next_message_kind(messages);
    next["content"] = "0";
    messages.push_back(next);
    const std::vector<int32_t> a = tokens_of(messages);
    messages.back()["content"] = "1";
    const std::vector<int32_t> b = tokens_of(messages);
    const auto split = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first;
    return std::vector<int32_t>(a.begin(), split);
}

} // namespace ninfer::text
