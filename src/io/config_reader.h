// Typed reads of config.json fields with errors that name the file and the field (internal to
// ninfer_io).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace ninfer::io {

struct Reader {
    const nlohmann::json& j;
    const std::string& source;

    [[noreturn]] void bad(const std::string& key, const std::string& what) const {
        fail_invalid(source, ": config field '", key, "' ", what);
    }
    int64_t integer(const std::string& key, int64_t fallback, int64_t min_value = 1) const {
        if (!j.contains(key) || j[key].is_null()) return fallback;
        if (!j[key].is_number_integer()) bad(key, "must be an integer");
        int64_t v = j[key].get<int64_t>();
        if (v < min_value) bad(key, concat("must be >= ", min_value, ", got ", v));
        return v;
    }
    double number(const std::string& key, double fallback) const {
        if (!j.contains(key) || j[key].is_null()) return fallback;
        if (!j[key].is_number()) bad(key, "must be a number");
        return j[key].get<double>();
    }
    bool boolean(const std::string& key, bool fallback) const {
        if (!j.contains(key) || j[key].is_null()) return fallback;
        if (!j[key].is_boolean()) bad(key, "must be true or false");
        return j[key].get<bool>();
    }
};

} // namespace ninfer::io
