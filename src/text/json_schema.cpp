// JSON Schema -> json::Grammar (see json_schema.h for the supported subset).
#include "text/json_schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "core/error.h"

namespace ninfer::text::json {
namespace {

using nlohmann::json;

// Validation keywords this compiler does not implement: rejected rather than ignored.
// clang-format off
const std::set<std::string, std::less<>> kRejected = {
    "not", "if", "then", "else", "patternProperties", "propertyNames", "minProperties",
    "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "contains",
    "minContains", "maxContains", "multipleOf", "$dynamicRef", "$recursiveRef",
    "unevaluatedItems", "unevaluatedProperties"};
// Supported keywords that constrain values: not allowed beside $ref / allOf / anyOf / oneOf
// (the matcher would have to intersect them).
const std::set<std::string, std::less<>> kValidation = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref"};
// clang-format on
const char* const kObjectWords[] = {"properties", "required", "additionalProperties"};
const char* const kArrayWords[] = {"items", "prefixItems", "additionalItems", "minItems",
                                   "maxItems"};
const char* const kStringWords[] = {"minLength", "maxLength", "pattern", "format"};
const char* const kNumberWords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

} // namespace

using detail::Compiler;

uint32_t Compiler::resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
        fail_at(path, "$ref '", ref, "' is not supported (only local refs starting with '#')");
    const std::string pointer = detail::percent_decode(ref.substr(1));
    auto it = refs_.find(pointer);
    if (it != refs_.end()) return it->second;
    const json* target = nullptr;
    try {
        const json::json_pointer ptr(pointer);
        if (doc_.contains(ptr)) target = &doc_.at(ptr);
    } catch (const json::exception&) {
        fail_at(path, "$ref '", ref, "' is not a valid JSON pointer");
    }
    if (!target) fail_at(path, "$ref '", ref, "' does not resolve within the schema");
    const uint32_t slot = add(Node{}); // a union of one: filled once the target compiled
    refs_.emplace(pointer, slot);
    const uint32_t node = compile(*target, pointer);
    g_.nodes[slot].alts = {node};
    return slot;
}

uint32_t Compiler::compile(const json& s, const std::string& path) {
    if (s.is_boolean()) return s.get<bool>() ? any() : add(Node{});
    if (!s.is_object()) fail_at(path, "a schema must be an object or a boolean");
    if (++depth_ > 128) fail_at(path, "the schema is nested too deeply");
    struct Leave {
        int& d;
        ~Leave() { --d; }
    } leave{depth_};
    for (const auto& [key, value] : s.items()) {
        if (!kRejected.count(key)) continue;
        if ((key == "unevaluatedProperties" || key == "unevaluatedItems") && value == true)
            continue;
        fail_at(path, "keyword '", key, "' is not supported");
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != false)
        fail_at(path, "keyword 'uniqueItems' is supported only as false");
    bool nullable = false;
    if (s.contains("nullable")) {
        if (!s["nullable"].is_boolean()) fail_at(path, "'nullable' must be a boolean");
        nullable = s["nullable"].get<bool>();
    }
    const uint32_t node = compile_inner(s, path);
    return nullable ? union_of({node, literal({json(nullptr)}, path)}) : node;
}

uint32_t Compiler::add(Node n) {
    if (g_.nodes.size() >= 200000) fail_invalid("JSON schema: too many schema nodes");
    g_.nodes.push_back(std::move(n));
    return uint32_t(g_.nodes.size() - 1);
}

uint32_t Compiler::union_of(std::vector<uint32_t> alts) {
    Node n;
    n.alts = std::move(alts);
    return add(std::move(n));
}

uint32_t Compiler::literal(std::vector<json> values, const std::string& path) {
    std::vector<std::pair<std::string, json>> entries;
    for (auto& v : values) {
        if (v.is_number_float() && !std::isfinite(v.get<double>()))
            fail_at(path, "enum/const values must be finite numbers");
        entries.emplace_back(v.dump(), std::move(v));
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    Node n;
    n.kind = NodeKind::Literal;
    for (auto& [text, value] : entries) {
        if (!n.texts.empty() && n.texts.back() == text) continue;
        n.texts.push_back(std::move(text));
        n.values.push_back(std::move(value));
    }
    return add(std::move(n));
}

uint32_t Compiler::any() {
    if (any_ != kNone) return any_;
    any_ = union_of({});
    const uint32_t obj = add(detail::leaf(NodeKind::Object));
    g_.nodes[obj].additional = any_;
    const uint32_t arr = add(detail::leaf(NodeKind::Array));
    g_.nodes[arr].items = any_;
    std::vector<uint32_t> alts = {obj, arr, add(detail::leaf(NodeKind::String)),
                                  add(detail::leaf(NodeKind::Number))};
    alts.push_back(literal({json(true), json(false), json(nullptr)}, ""));
    g_.nodes[any_].alts = std::move(alts);
    return any_;
}

void Compiler::require_alone(const json& s, const std::string& path, const char* self) {
    for (const auto& [key, value] : s.items())
        if (key != self && kValidation.count(key))
            fail_at(path, "keyword '", key, "' beside '", self,
                    "' is not supported (move it into the subschemas)");
}

uint32_t Compiler::compile_inner(const json& s, const std::string& path) {
    if (s.contains("$ref")) {
        require_alone(s, path, "$ref");
        if (!s["$ref"].is_string()) fail_at(path, "'$ref' must be a string");
        return resolve(s["$ref"].get<std::string>(), path + "/$ref");
    }
    if (s.contains("allOf")) {
        require_alone(s, path, "allOf");
        const json& all = s["allOf"];
        if (!all.is_array() || all.size() != 1)
            fail_at(path, "'allOf' is supported only with a single subschema");
        return compile(all[0], path + "/allOf/0");
    }
    for (const char* word : {"anyOf", "oneOf"}) {
        if (!s.contains(word)) continue;
        require_alone(s, path, word);
        const json& list = s[word];
        if (!list.is_array() || list.empty())
            fail_at(path, "'", word, "' must be a non-empty array of schemas");
        std::vector<uint32_t> alts;
        for (size_t i = 0; i < list.size(); ++i)
            alts.push_back(compile(list[i], path + "/" + word + "/" + std::to_string(i)));
        return union_of(std::move(alts));
    }
    if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
    return typed(s, path);
}

uint32_t Compiler::enumeration(const json& s, const std::string& path) {
    std::vector<json> values;
    if (s.contains("enum")) {
        if (!s["enum"].is_array()) fail_at(path, "'enum' must be an array");
        values.assign(s["enum"].begin(), s["enum"].end());
    }
    if (s.contains("const")) {
        if (s.contains("enum")) {
            if (std::find(values.begin(), values.end(), s["const"]) == values.end())
                values.clear();
            else
                values = {s["const"]};
        } else {
            values = {s["const"]};
        }
    }
    json rest = s;
    rest.erase("enum");
    rest.erase("const");
    bool constrained = false;
    for (const auto& [key, value] : rest.items()) constrained |= kValidation.count(key) > 0;
    if (constrained) {
        const uint32_t base = typed(rest, path);
        std::erase_if(values, [&](const json& v) { return !g_.validate(base, v); });
    }
    if (values.empty()) fail_at(path, "no value of enum/const satisfies the schema");
    return literal(std::move(values), path);
}

uint32_t Compiler::typed(const json& s, const std::string& path) {
    std::vector<std::string> types;
    if (s.contains("type")) {
        const json& t = s["type"];
        if (t.is_string()) {
            types.push_back(t.get<std::string>());
        } else if (t.is_array() && !t.empty()) {
            for (const auto& e : t) {
                if (!e.is_string()) fail_at(path, "'type' entries must be strings");
                types.push_back(e.get<std::string>());
            }
        } else {
            fail_at(path, "'type' must be a string or a non-empty array of strings");
        }
    } else {
        if (detail::has_any(s, kObjectWords)) types.push_back("object");
        if (detail::has_any(s, kArrayWords)) types.push_back("array");
        if (detail::has_any(s, kStringWords)) types.push_back("string");
        if (detail::has_any(s, kNumberWords)) types.push_back("number");
        if (types.empty()) return any();
    }
    std::vector<uint32_t> alts;
    for (const auto& t : types) {
        if (t == "object")
            alts.push_back(object(s, path));
        else if (t == "array")
            alts.push_back(array(s, path));
        else if (t == "string")
            alts.push_back(string(s, path));
        else if (t == "number" || t == "integer")
            alts.push_back(number(s, path, t));
        else if (t == "boolean")
            alts.push_back(literal({json(false), json(true)}, path));
        else if (t == "null")
            alts.push_back(literal({json(nullptr)}, path));
        else
            fail_at(path, "unknown type '", t, "'");
    }
    return alts.size() == 1 ? alts[0] : union_of(std::move(alts));
}

uint32_t detail::compile_schema(const nlohmann::json& schema, Grammar& g) {
    Compiler c(schema, g);
    if (schema.is_null()) return c.compile(nlohmann::json{{"type", "object"}}, "");
    return c.resolve("#", "");
}

} // namespace ninfer::text::json
