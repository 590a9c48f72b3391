// The JSON Schema compiler's typed nodes: object, array, string, number and integer keywords.
#include <algorithm>
#include <cmath>

#include "text/json_schema_compiler.h"

namespace ninfer::text::json::detail {

uint32_t Compiler::count(const json& s, const char* key, const std::string& path, uint32_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0))
        return uint32_t(std::min<uint64_t>(v.get<uint64_t>(), 0xFFFFFFFFu));
    if (v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v)
        return uint32_t(std::min(v.get<double>(), 4294967295.0));
    fail_at(path, "'", key, "' must be a non-negative integer");
}

uint32_t Compiler::object(const json& s, const std::string& path) {
    Node n;
    n.kind = NodeKind::Object;
    if (s.contains("properties")) {
        if (!s["properties"].is_object()) fail_at(path, "'properties' must be an object");
        for (const auto& [name, sub] : s["properties"].items())
            n.props.push_back(
                {name, compile(sub, path + "/properties/" + detail::escape_pointer(name)), false});
    }
    bool explicit_closed = false;
    if (s.contains("additionalProperties")) {
        const json& a = s["additionalProperties"];
        if (a == false)
            explicit_closed = true;
        else
            n.additional = compile(a, path + "/additionalProperties");
    } else if (!(g_.options.closed_objects && s.contains("properties"))) {
        n.additional = any();
    }
    if (s.contains("required")) {
        if (!s["required"].is_array()) fail_at(path, "'required' must be an array");
        for (const auto& r : s["required"]) {
            if (!r.is_string()) fail_at(path, "'required' entries must be strings");
            const std::string name = r.get<std::string>();
            auto p = std::find_if(n.props.begin(), n.props.end(),
                                  [&](const Property& q) { return q.name == name; });
            if (p != n.props.end()) {
                p->required = true;
            } else if (explicit_closed) {
                fail_at(path, "required property '", name,
                        "' is not in properties and additionalProperties is false");
            } else {
                n.props.push_back({name, n.additional == kNone ? any() : n.additional, true});
            }
        }
    }
    detail::index_keys(n);
    return add(std::move(n));
}

uint32_t Compiler::array(const json& s, const std::string& path) {
    Node n;
    n.kind = NodeKind::Array;
    n.items = any();
    if (s.contains("items") && s["items"].is_array()) { // draft 4 tuple form
        if (s.contains("prefixItems"))
            fail_at(path, "'prefixItems' with an array 'items' is ambiguous");
        for (size_t i = 0; i < s["items"].size(); ++i)
            n.prefix.push_back(compile(s["items"][i], path + "/items/" + std::to_string(i)));
        if (s.contains("additionalItems"))
            n.items = s["additionalItems"] == false
                          ? kNone
                          : compile(s["additionalItems"], path + "/additionalItems");
    } else {
        if (s.contains("prefixItems")) {
            const json& p = s["prefixItems"];
            if (!p.is_array()) fail_at(path, "'prefixItems' must be an array");
            for (size_t i = 0; i < p.size(); ++i)
                n.prefix.push_back(compile(p[i], path + "/prefixItems/" + std::to_string(i)));
        }
        if (s.contains("items"))
            n.items = s["items"] == false ? kNone : compile(s["items"], path + "/items");
    }
    n.min_items = count(s, "minItems", path, 0);
    n.max_items = count(s, "maxItems", path, n.max_items);
    if (n.items == kNone) n.max_items = std::min<uint32_t>(n.max_items, n.prefix.size());
    if (n.min_items > n.max_items)
        fail_at(path, "no array satisfies minItems ", n.min_items, " (maxItems ", n.max_items, ", ",
                n.prefix.size(), " prefix items)");
    return add(std::move(n));
}

uint32_t Compiler::string(const json& s, const std::string& path) {
    Node n;
    n.kind = NodeKind::String;
    n.min_length = count(s, "minLength", path, 0);
    n.max_length = count(s, "maxLength", path, n.max_length);
    if (n.min_length > n.max_length) fail_at(path, "minLength is greater than maxLength");
    return add(std::move(n));
}

void Compiler::bound(const json& s, const std::string& path, bool lower, bool& has, double& v,
                     bool& excl) {
    const char* plain = lower ? "minimum" : "maximum";
    const char* strict = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    auto num = [&](const char* key) {
        if (!s[key].is_number()) fail_at(path, "'", key, "' must be a number");
        const double d = s[key].get<double>();
        if (!std::isfinite(d)) fail_at(path, "'", key, "' must be finite");
        return d;
    };
    if (s.contains(plain)) has = true, v = num(plain);
    if (!s.contains(strict)) return;
    if (s[strict].is_boolean()) { // draft 4
        excl = has && s[strict].get<bool>();
        return;
    }
    const double e = num(strict);
    if (!has || (lower ? e >= v : e <= v)) has = true, v = e, excl = true;
}

uint32_t Compiler::number(const json& s, const std::string& path, const std::string& type) {
    Node n;
    n.kind = type == "integer" ? NodeKind::Integer : NodeKind::Number;
    bool lo_excl = false, hi_excl = false;
    bound(s, path, true, n.has_lo, n.lo, lo_excl);
    bound(s, path, false, n.has_hi, n.hi, hi_excl);
    if (n.has_lo && n.lo >= kDigitLimit) fail_at(path, "minimum must be below 1e18");
    if (n.has_hi && n.hi <= -kDigitLimit) fail_at(path, "maximum must be above -1e18");
    if (n.kind == NodeKind::Integer) {
        const double lim = kDigitLimit - 1;
        n.ilo = int64_t(-lim), n.ihi = int64_t(lim);
        if (n.has_lo && n.lo > -lim)
            n.ilo = int64_t(lo_excl ? std::floor(n.lo) + 1 : std::ceil(n.lo));
        if (n.has_hi && n.hi < lim)
            n.ihi = int64_t(hi_excl ? std::ceil(n.hi) - 1 : std::floor(n.hi));
        n.has_lo = n.has_hi = true;
        if (n.ilo > n.ihi) fail_at(path, "no integer satisfies the bounds");
        return add(std::move(n));
    }
    if (lo_excl) n.lo = std::nextafter(n.lo, INFINITY);
    if (hi_excl) n.hi = std::nextafter(n.hi, -INFINITY);
    if (n.has_lo && n.has_hi) {
        if (n.lo > n.hi) fail_at(path, "no number satisfies the bounds");
        if (n.lo == n.hi) return literal({json(n.lo)}, path);
        // Generated numbers have at most 18 fraction digits and no exponent.
        const long double first = std::ceil((long double)n.lo * 1e18L) / 1e18L;
        if (first > (long double)n.hi)
            fail_at(path, "the bounds are too close for numbers with 18 fraction digits");
    }
    return add(std::move(n));
}

} // namespace ninfer::text::json::detail
