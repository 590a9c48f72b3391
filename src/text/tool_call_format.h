// Internal: the pieces of qwen3_coder tool-call parsing (value typing by JSON schema, JSON
// formatting like Python json.dumps).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ninfer::text::detail {

// The JSON schema of `function`'s parameter `param` in OpenAI `tools` (null when unknown), a
// local "$ref" ("#/$defs/X", any JSON pointer into the tool's parameters) resolved.
nlohmann::ordered_json parameter_schema(const nlohmann::ordered_json& tools,
                                        const std::string& function, const std::string& param);

// `schema` with its local "$ref"s at the top resolved against `root` (up to 16 hops; an
// unresolvable reference leaves the schema as it is).
nlohmann::ordered_json resolve_ref(const nlohmann::ordered_json& root,
                                   nlohmann::ordered_json schema);

// The type the parser converts a parameter to (lower case): the schema's "type" (a type array:
// its first non-null entry), "object" when it has anyOf/oneOf/properties, else "" (text).
std::string parser_type(const nlohmann::ordered_json& schema);
// Whether a parameter of that type stays raw text (string, str, text, varchar, char, enum, "").
bool parser_keeps_text(const std::string& type);

// A parameter's raw text converted to the type its schema names (vLLM qwen3_coder rules:
// "null" -> null; string types keep the text; integers, numbers and booleans parse or stay
// text; objects and arrays parse as JSON or stay text; no schema: text). Beyond vLLM: a number
// or boolean that does not parse as one is tried as JSON, and a text-typed parameter with an
// enum/const whose text is not one of its strings takes the JSON value it spells when that is
// a member.
nlohmann::ordered_json typed_value(const std::string& raw, const nlohmann::ordered_json& schema);

// Python json.dumps(value, ensure_ascii=False) of a value.
std::string dumps(const nlohmann::ordered_json& value);

// The text of a parameter value: one leading and one trailing newline removed.
std::string strip_value_newlines(std::string v);

} // namespace ninfer::text::detail
