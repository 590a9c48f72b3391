#include "messages_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ninfer::app {

Conversation parse_conversation(const nlohmann::ordered_json& j, const std::string& source) {
    Conversation c;
    if (j.is_array()) {
        c.messages = j;
    } else {
        require(j.is_object() && j.contains("messages"), source,
                ": expected a messages array or an object with \"messages\"");
        c.messages = j["messages"];
        if (j.contains("tools") && !j["tools"].is_null()) c.tools = j["tools"];
    }
    require(c.messages.is_array(), source, ": \"messages\" must be an array");
    for (const auto& m : c.messages)
        require(m.is_object() && m.contains("role") && m["role"].is_string(), source,
                ": every message needs a string \"role\"");
    require(c.tools.is_null() || c.tools.is_array(), source, ": \"tools\" must be an array");
    return c;
}

Conversation read_messages_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorCategory::Io, "cannot read messages file ", path);
    std::ostringstream s;
    s << in.rdbuf();
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(s.str());
    } catch (const nlohmann::ordered_json::exception& e) {
        fail_invalid(path, ": ", e.what());
    }
    return parse_conversation(j, path);
}

} // namespace ninfer::app
