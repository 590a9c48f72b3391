// Internal: the pieces of qwen3_coder tool-call parsing (value typing by JSON schema, JSON
// formatting like Python json.dumps).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ninfer::text::detail {

// The JSON schema of `function`'s parameter `param` in OpenAI `tools` (null when unknown).
nlohmann::ordered_json parameter_schema(const nlohmann::ordered_json& tools,
                                        const std::string& function, const std::string& param);

// A parameter's raw text converted to the type its schema names (vLLM qwen3_coder rules:
// "null" -> null; string types keep the text; integers, numbers and booleans parse or stay
// text; objects and arrays parse as JSON or stay text; no schema: text).
nlohmann::ordered_json typed_value(const std::string& raw, const nlohmann::ordered_json& schema);

// Python json.dumps(value, ensure_ascii=False) of a value.
std::string dumps(const nlohmann::ordered_json& value);

// The text of a parameter value: one leading and one trailing newline removed.
std::string strip_value_newlines(std::string v);

} // namespace ninfer::text::detail
