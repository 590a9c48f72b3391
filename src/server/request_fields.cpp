#include "server/request_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace ninfer::server {

bool json_deeper_than(const std::string& text, int limit) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

Json parse_body(const std::string& body) {
    if (json_deeper_than(body, kMaxJsonDepth))
        throw ApiError(400, "the request body nests arrays and objects deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
    Json j;
    try {
        j = Json::parse(body);
    } catch (const Json::exception& e) {
        throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
    return j;
}

const Json* field(const Json& obj, const char* key) {
    if (!obj.is_object()) throw ApiError(400, "expected a JSON object");
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<double> opt_number(const Json& obj, const char* key, double lo, double hi) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad_param(key, std::string("'") + key + "' must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        bad_param(key, std::string("'") + key + "' must be in [" + Json(lo).dump() + ", " +
                           Json(hi).dump() + "], got " + v->dump());
    return x;
}

std::optional<int64_t> opt_int(const Json& obj, const char* key, int64_t lo, int64_t hi) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    int64_t x = 0;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
            bad_param(key, std::string("'") + key + "' is too large");
        x = v->get<int64_t>();
    } else if (v->is_number_float()) {
        const double d = v->get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15)
            bad_param(key, std::string("'") + key + "' must be an integer");
        x = int64_t(d);
    } else {
        bad_param(key, std::string("'") + key + "' must be an integer");
    }
    if (x < lo || x > hi)
        bad_param(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got " + std::to_string(x));
    return x;
}

std::optional<bool> opt_bool(const Json& obj, const char* key) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad_param(key, std::string("'") + key + "' must be a boolean");
    return v->get<bool>();
}

std::optional<std::string> opt_string(const Json& obj, const char* key) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad_param(key, std::string("'") + key + "' must be a string");
    return v->get<std::string>();
}

std::string req_string(const Json& obj, const char* key) {
    auto s = opt_string(obj, key);
    if (!s) bad_param(key, std::string("'") + key + "' is required");
    return *s;
}

std::vector<std::string> string_list(const Json& obj, const char* key, size_t max_items) {
    const Json* v = field(obj, key);
    std::vector<std::string> out;
    if (!v) return out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        for (const auto& s : *v) {
            if (!s.is_string()) bad_param(key, std::string("'") + key + "' must hold strings only");
            out.push_back(s.get<std::string>());
        }
    } else {
        bad_param(key, std::string("'") + key + "' must be a string or an array of strings");
    }
    if (out.size() > max_items)
        bad_param(key, std::string("'") + key + "' holds more than " + std::to_string(max_items) +
                           " items");
    return out;
}

int parse_priority(const Json& obj) {
    return int(opt_int(obj, "priority", -kMaxPriority, kMaxPriority).value_or(0));
}

void reject_field(const Json& obj, const char* key, const char* why) {
    const Json* v = field(obj, key);
    if (!v) return;
    if ((v->is_boolean() && !v->get<bool>()) || ((v->is_object() || v->is_array()) && v->empty()))
        return;
    bad_param(key, std::string("'") + key + "' is not supported: " + why);
}

std::optional<int> reasoning_effort_budget(const std::string& effort) {
    if (effort == "low") return 512;
    if (effort == "medium") return 2048;
    if (effort == "high") return 8192;
    return std::nullopt;
}

} // namespace ninfer::server
