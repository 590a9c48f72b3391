// The JSON Schema compiler's class (internal to json_schema.cpp and json_schema_types.cpp).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/json_schema.h"

namespace ninfer::text::json::detail {

constexpr double kDigitLimit = 1e18; // |integer part| < 10^18 (18 digits)

class Compiler {
public:
    using json = nlohmann::json;
    Compiler(const json& doc, Grammar& g) : doc_(doc), g_(g) {}

    uint32_t resolve(const std::string& ref, const std::string& path); // a local $ref
    uint32_t compile(const json& s, const std::string& path);

private:
    template <typename... Args> [[noreturn]] void fail_at(const std::string& path, Args&&... a) {
        fail_invalid("JSON schema at #", path, ": ", std::forward<Args>(a)...);
    }

    uint32_t add(Node n);
    uint32_t union_of(std::vector<uint32_t> alts);
    uint32_t literal(std::vector<json> values, const std::string& path);
    uint32_t any();
    // Keywords beside a combinator must be annotations.
    void require_alone(const json& s, const std::string& path, const char* self);
    uint32_t compile_inner(const json& s, const std::string& path);
    uint32_t enumeration(const json& s, const std::string& path);
    uint32_t typed(const json& s, const std::string& path);
    // json_schema_types.cpp
    uint32_t count(const json& s, const char* key, const std::string& path, uint32_t dflt);
    uint32_t object(const json& s, const std::string& path);
    uint32_t array(const json& s, const std::string& path);
    uint32_t string(const json& s, const std::string& path);
    // Reads minimum/exclusiveMinimum (lower) or maximum/exclusiveMaximum into (has, v, excl).
    void bound(const json& s, const std::string& path, bool lower, bool& has, double& v,
               bool& excl);
    uint32_t number(const json& s, const std::string& path, const std::string& type);

    const json& doc_;
    Grammar& g_;
    std::map<std::string, uint32_t> refs_;
    uint32_t any_ = kNone;
    int depth_ = 0;
};

} // namespace ninfer::text::json::detail
