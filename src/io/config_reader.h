// Typed reads of config.json fields with errors that name the file and the field (internal to
// ninfer_io).
#pragma once

#include <cmath>
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
    // An integer in [min_value, max_value]: every field has an upper bound, so that the sizes
    // derived from them (limits in hf_config.cpp) cannot overflow or ask for absurd memory.
    int64_t integer(const std::string& key, int64_t fallback, int64_t min_value,
                    int64_t max_value) const {
        if (!j.contains(key) || j[key].is_null()) return fallback;
        if (!j[key].is_number_integer()) bad(key, "must be an integer");
        if (j[key].is_number_unsigned() && j[key].get<uint64_t>() > uint64_t(max_value))
            bad(key, concat("must be <= ", max_value, ", got ", j[key].get<uint64_t>()));
        int64_t v = j[key].get<int64_t>();
        if (v < min_value) bad(key, concat("must be >= ", min_value, ", got ", v));
        if (v > max_value) bad(key, concat("must be <= ", max_value, ", got ", v));
        return v;
    }
    // A positive number that is finite (rope_theta, eps: inf or nan would poison every logit).
    double positive_number(const std::string& key, double fallback) const {
        const double v = number(key, fallback);
        if (!(v > 0) || !std::isfinite(v)) bad(key, "must be a positive finite number");
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
