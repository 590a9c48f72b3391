// Reading an OpenAI-style messages file: either a JSON array of messages or an object with
// "messages" and optional "tools" (and, for render, optional template variables).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ninfer::app {

struct Conversation {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools; // null or an array
};

// Raises ninfer::Error (Io when unreadable, InvalidArgument when malformed).
Conversation read_messages_file(const std::string& path);
Conversation parse_conversation(const nlohmann::ordered_json& j, const std::string& source);

} // namespace ninfer::app
