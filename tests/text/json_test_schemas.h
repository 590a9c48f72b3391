// JSON Schemas shared by the JSON constraint tests and bench/text/bench_json_constraint.cpp: a
// closed object with every scalar kind, a recursive tree, an anyOf union and an open object.
#pragma once

namespace json_test {

inline constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "height": {"type": "number", "exclusiveMinimum": 0, "maximum": 3},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
    "address": {"$ref": "#/$defs/address"},
    "nick": {"type": ["string", "null"]}
  },
  "required": ["name", "age", "role"],
  "additionalProperties": false,
  "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]}}
})";

inline constexpr const char* kTree = R"({"$defs": {"node": {"type": "object", "properties": {
  "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
  "maxItems": 2}}, "required": ["v"], "additionalProperties": false}}, "$ref": "#/$defs/node"})";

inline constexpr const char* kUnion = R"({"type": "array", "items": {"anyOf": [
  {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
   "required": ["kind", "r"], "additionalProperties": false},
  {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer"},
   "h": {"type": "integer"}}, "required": ["kind", "w", "h"], "additionalProperties": false},
  {"type": "string", "enum": ["none", "nothing"]}, {"type": "null"}]}, "minItems": 1})";

inline constexpr const char* kOpen = R"({"type": "object", "properties": {"a": {"type": "integer"},
  "b": {"type": "array", "items": {"type": "integer"}}},
  "additionalProperties": {"type": ["string", "boolean"]}})";

} // namespace json_test
