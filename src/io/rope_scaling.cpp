#include "io/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "core/error.h"

namespace ninfer::io {
namespace {

using nlohmann::json;

// transformers' get_mscale: the attention temperature of a context stretched `scale` times.
double yarn_mscale(double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The rotary dimension at which a frequency turns `rotations` times over `positions` positions.
double correction_dim(double rotations, double d, double theta, double positions) {
    return d * std::log(positions / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

// A scaling factor: >= 1 (HF warns below 1) and finite; 1024 bounds what any context needs.
double checked_factor(double factor, const Reader& r) {
    if (!(factor >= 1) || !std::isfinite(factor) || factor > 1024)
        r.bad("factor", concat("must be a number in [1, 1024], got ", factor));
    return factor;
}

// An optional number of the dict (null or absent: nullopt).
std::optional<double> optional_number(const json& rp, const Reader& r, const char* key) {
    if (!rp.contains(key) || rp[key].is_null()) return std::nullopt;
    return r.number(key, 0);
}

void yarn(const json& rp, ModelConfig& c, const Reader& r) {
    const int64_t d = c.rotary_dim, half = d / 2;
    const double theta = c.rope_theta;
    const int64_t L0 = r.integer("original_max_position_embeddings", c.max_position_embeddings,
                                 1, int64_t(1) << 24);
    const double factor = checked_factor(
        optional_number(rp, r, "factor").value_or(double(c.max_position_embeddings) / double(L0)),
        r);
    const std::optional<double> given = optional_number(rp, r, "attention_factor");
    const std::optional<double> mscale = optional_number(rp, r, "mscale"),
                                mscale_all = optional_number(rp, r, "mscale_all_dim");
    double attention = 0;
    if (given) {
        if (!(*given > 0) || !std::isfinite(*given)) r.bad("attention_factor", "must be > 0");
        attention = *given;
    } else if (mscale && mscale_all && *mscale != 0 && *mscale_all != 0) { // HF: both truthy
        attention = yarn_mscale(factor, *mscale) / yarn_mscale(factor, *mscale_all);
    } else {
        attention = yarn_mscale(factor, 1.0);
    }
    // HF: `get("beta_fast") or 32`, so 0 takes the default too.
    const double fast = optional_number(rp, r, "beta_fast").value_or(0),
                 slow = optional_number(rp, r, "beta_slow").value_or(0);
    const double beta_fast = fast != 0 ? fast : 32.0, beta_slow = slow != 0 ? slow : 1.0;
    if (!(beta_fast > 0 && beta_slow > 0) || !std::isfinite(beta_fast) ||
        !std::isfinite(beta_slow))
        r.bad("beta_fast", "and beta_slow must be positive finite numbers");
    const bool truncate = r.boolean("truncate", true);
    double low = correction_dim(beta_fast, double(d), theta, double(L0));
    double high = correction_dim(beta_slow, double(d), theta, double(L0));
    if (truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(d - 1));
    if (low == high) high += 0.001; // HF: no division by zero in the ramp
    c.rope_inv_freq.resize(size_t(half));
    for (int64_t j = 0; j < half; ++j) {
        const double inv = default_inv_freq(theta, j, d);
        const double ramp = std::clamp((double(j) - low) / (high - low), 0.0, 1.0);
        const double extrapolate = 1.0 - ramp;
        c.rope_inv_freq[size_t(j)] = float(inv / factor * (1.0 - extrapolate) + inv * extrapolate);
    }
    c.rope_attention_factor = attention;
    // vLLM's derived context: YaRN stretches the original context `factor` times.
    c.position_limit = std::max(c.max_position_embeddings, int64_t(std::floor(factor * double(L0))));
}

} // namespace

double default_inv_freq(double theta, int64_t j, int64_t d) {
    return 1.0 / std::pow(theta, double(2 * j) / double(d));
}

const json* rope_dict(const json& text) {
    for (const char* key : {"rope_scaling", "rope_parameters"})
        if (text.contains(key) && text[key].is_object() && !text[key].empty()) return &text[key];
    return nullptr;
}

void parse_rope_scaling(const json* rope, ModelConfig& c, const Reader& r) {
    c.rope_type = "default";
    c.rope_inv_freq.clear();
    c.rope_attention_factor = 1.0;
    c.position_limit = c.max_position_embeddings;
    if (!rope) return;
    const json& rp = *rope;
    Reader rr{rp, r.source};
    const json type_field = rp.contains("rope_type") ? rp["rope_type"]
                            : rp.contains("type")    ? rp["type"]
                                                     : json("default");
    if (!type_field.is_string()) rr.bad("rope_type", "must be a string");
    c.rope_type = type_field.get<std::string>();
    if (c.rope_type == "default") return;
    if (c.rope_type == "linear") {
        const double factor = checked_factor(rr.number("factor", 1.0), rr);
        c.rope_inv_freq.resize(size_t(c.rotary_dim / 2));
        for (size_t j = 0; j < c.rope_inv_freq.size(); ++j)
            c.rope_inv_freq[j] =
                float(default_inv_freq(c.rope_theta, int64_t(j), c.rotary_dim) / factor);
        return;
    }
    if (c.rope_type == "yarn") return yarn(rp, c, rr);
    fail(ErrorCategory::Unsupported, r.source, ": rope_type '", c.rope_type,
         "' is not supported (default, linear or yarn)");
}

} // namespace ninfer::io
