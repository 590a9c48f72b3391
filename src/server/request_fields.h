// Typed, validated access to the fields of a JSON request body. Absent and null fields read as
// "not given"; a wrong type or an out-of-range value raises ApiError 400 naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::server {

// Ordered: tool schemas reach the chat template (tojson) in the client's key order.
using Json = nlohmann::ordered_json;

// The deepest nesting of arrays and objects a request may hold (deeper: 400). Bounds the
// recursion of everything downstream (chat template values, schema compilers, dumps).
constexpr int kMaxJsonDepth = 64;

// Parses a request body; it must be a JSON object nested at most kMaxJsonDepth deep (400
// otherwise, with the parser's message).
Json parse_body(const std::string& body);

// Whether JSON text nests arrays and objects deeper than `limit` (strings are skipped).
bool json_deeper_than(const std::string& text, int limit);

// The field, or nullptr when absent or null. Raises 400 when `obj` is not an object.
const Json* field(const Json& obj, const char* key);

std::optional<double> opt_number(const Json& obj, const char* key, double lo, double hi);
std::optional<int64_t> opt_int(const Json& obj, const char* key, int64_t lo, int64_t hi);
std::optional<bool> opt_bool(const Json& obj, const char* key);
std::optional<std::string> opt_string(const Json& obj, const char* key);
// A required string field.
std::string req_string(const Json& obj, const char* key);
// A string or an array of strings (at most max_items).
std::vector<std::string> string_list(const Json& obj, const char* key, size_t max_items);

// `priority` (an extension of both APIs, as vLLM's: lower runs first): an integer within
// +-kMaxPriority, 0 when absent.
constexpr int64_t kMaxPriority = 1000000;
int parse_priority(const Json& obj);

// The reasoning budget of an OpenAI reasoning_effort: low 512, medium 2048, high 8192 tokens
// (none/minimal turn thinking off instead; other values: no budget).
std::optional<int> reasoning_effort_budget(const std::string& effort);

// 400 "`key` is not supported: why" when the field is present and not null/false/empty.
void reject_field(const Json& obj, const char* key, const char* why);

} // namespace ninfer::server
