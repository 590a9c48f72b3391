#include "text/tool_call_format.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/value.h"

namespace ninfer::text::detail {

nlohmann::ordered_json parameter_schema(const nlohmann::ordered_json& tools,
                                        const std::string& function, const std::string& param) {
    if (!tools.is_array()) return nullptr;
    for (const auto& t : tools) {
        const auto& f = t.contains("function") ? t["function"] : t; // OpenAI or bare
        if (!f.is_object() || f.value("name", "") != function) continue;
        const char* keys[] = {"parameters", "input_schema"}; // OpenAI, Anthropic
        for (const char* k : keys)
            if (f.contains(k) && f[k].is_object() && f[k].contains("properties") &&
                f[k]["properties"].is_object() && f[k]["properties"].contains(param))
                return resolve_ref(f[k], f[k]["properties"][param]);
    }
    return nullptr;
}

nlohmann::ordered_json resolve_ref(const nlohmann::ordered_json& root,
                                   nlohmann::ordered_json schema) {
    for (int hop = 0; hop < 16; ++hop) {
        if (!schema.is_object() || !schema.contains("$ref") || !schema["$ref"].is_string())
            return schema;
        const std::string ref = schema["$ref"].get<std::string>();
        if (ref.empty() || ref[0] != '#') return schema;
        try {
            const nlohmann::ordered_json::json_pointer ptr(ref.substr(1));
            if (!root.contains(ptr)) return schema;
            schema = root.at(ptr);
        } catch (const nlohmann::json::exception&) {
            return schema;
        }
    }
    return schema;
}

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

} // namespace

std::string parser_type(const nlohmann::ordered_json& schema) {
    if (!schema.is_object()) return "";
    const auto& t = schema.contains("type") ? schema["type"] : nlohmann::ordered_json();
    if (t.is_string()) return lower(t.get<std::string>());
    if (t.is_array())
        for (const auto& x : t)
            if (x.is_string() && x.get<std::string>() != "null") return lower(x.get<std::string>());
    if (schema.contains("anyOf") || schema.contains("oneOf") || schema.contains("properties"))
        return "object";
    return "";
}

bool parser_keeps_text(const std::string& type) {
    return type == "string" || type == "str" || type == "text" || type == "varchar" ||
           type == "char" || type == "enum" || type.empty();
}

namespace {

bool starts_with_any(const std::string& s, std::initializer_list<const char*> prefixes) {
    for (const char* p : prefixes)
        if (s.rfind(p, 0) == 0) return true;
    return false;
}

nlohmann::ordered_json parse_number(const std::string& raw, bool integer) {
    const std::string s = raw.substr(raw.find_first_not_of(" \t\n\r") == std::string::npos
                                         ? 0
                                         : raw.find_first_not_of(" \t\n\r"));
    try {
        size_t used = 0;
        if (integer) {
            const long long v = std::stoll(s, &used);
            if (used == s.size() || s.find_first_not_of(" \t\n\r", used) == std::string::npos)
                return v;
            return raw;
        }
        const double v = std::stod(s, &used);
        if ((used == s.size() || s.find_first_not_of(" \t\n\r", used) == std::string::npos) &&
            std::isfinite(v)) {
            if (v == std::floor(v) && std::fabs(v) < 9.2e18) return static_cast<long long>(v);
            return v;
        }
    } catch (const std::exception&) {
    }
    return raw;
}

nlohmann::ordered_json as_json_or_text(const std::string& raw) {
    try {
        return nlohmann::ordered_json::parse(raw);
    } catch (const nlohmann::json::exception&) {
        return raw;
    }
}

// A text-typed value with an enum/const: the text, or the member its JSON spells.
nlohmann::ordered_json enum_member(const std::string& raw, const nlohmann::ordered_json& schema) {
    nlohmann::ordered_json members = nlohmann::ordered_json::array();
    if (schema.contains("enum") && schema["enum"].is_array()) members = schema["enum"];
    if (schema.contains("const")) members.push_back(schema["const"]);
    if (members.empty()) return raw;
    for (const auto& m : members)
        if (m.is_string() && m.get<std::string>() == raw) return raw;
    const auto v = nlohmann::ordered_json::parse(raw, nullptr, false);
    if (!v.is_discarded())
        for (const auto& m : members)
            if (!m.is_string() && m == v) return v;
    return raw;
}

} // namespace

nlohmann::ordered_json typed_value(const std::string& raw, const nlohmann::ordered_json& schema) {
    if (lower(raw) == "null") return nullptr;
    if (schema.is_null()) return raw;
    const std::string type = parser_type(schema);
    if (parser_keeps_text(type))
        return schema.is_object() ? enum_member(raw, schema) : nlohmann::ordered_json(raw);
    if (starts_with_any(type, {"int", "uint", "long", "short", "unsigned"})) {
        auto v = parse_number(raw, true);
        return v.is_string() ? as_json_or_text(raw) : v;
    }
    if (starts_with_any(type, {"num", "float", "double"})) {
        auto v = parse_number(raw, false);
        return v.is_string() ? as_json_or_text(raw) : v;
    }
    if (type == "boolean" || type == "bool" || type == "binary") {
        const std::string l = lower(raw);
        if (l == "true" || l == "false") return l == "true";
        return as_json_or_text(raw);
    }
    return as_json_or_text(raw);
}

std::string dumps(const nlohmann::ordered_json& value) {
    return jinja::to_json(jinja::Value::from_json(value), jinja::JsonOptions{});
}

std::string strip_value_newlines(std::string v) {
    if (!v.empty() && v.front() == '\n') v.erase(0, 1);
    if (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
}

} // namespace ninfer::text::detail
