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

std::vector<int32_t> follow_up_prefix(
    nlohmann::ordered_json messages,
    const std::function<std::vector<int32_t>(const nlohmann::ordered_json&)>& tokens_of) {
    messages.push_back({{"role", "user"}, {"content", "0"}});
    const std::vector<int32_t> a = tokens_of(messages);
    messages.back()["content"] = "1";
    const std::vector<int32_t> b = tokens_of(messages);
    const auto split = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first;
    return std::vector<int32_t>(a.begin(), split);
}

} // namespace ninfer::text
