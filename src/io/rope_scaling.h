// RoPE scaling of an HF config (rope_parameters / legacy rope_scaling), as transformers'
// ROPE_INIT_FUNCTIONS compute it:
//   linear: inv_freq[j] = theta^(-2j / d) / factor; attention factor 1.
//   yarn (arXiv 2309.00071; Qwen's recipe for contexts past 262k): with d = rotary_dim,
//     pos[j] = theta^(2j / d), extrapolation 1 / pos[j], interpolation 1 / (factor pos[j]),
//     corr(r) = d ln(L0 / (2 pi r)) / (2 ln theta) with L0 = original_max_position_embeddings,
//     low = max(floor(corr(beta_fast)), 0), high = min(ceil(corr(beta_slow)), d - 1) (no floor /
//     ceil with truncate false), ramp[j] = clamp((j - low) / (high - low), 0, 1) (high += 0.001
//     when equal), e[j] = 1 - ramp[j]:
//     inv_freq[j] = interpolation[j] (1 - e[j]) + extrapolation[j] e[j];
//     attention factor: attention_factor if given, else m(factor, mscale) / m(factor,
//     mscale_all_dim) when both are given, else m(factor, 1), m(s, k) = 0.1 k ln(s) + 1 (1 when
//     s <= 1). factor null: max_position_embeddings / L0. Defaults: beta_fast 32, beta_slow 1,
//     L0 = max_position_embeddings, truncate true.
// Cos and sin are multiplied by the attention factor (HF's attention_scaling), so the rotated
// dims of q and k are scaled and the pass-through dims are not.
#pragma once

#include <nlohmann/json.hpp>

#include "io/config_reader.h"
#include "io/hf_config.h"

namespace ninfer::io {

// Default RoPE's inverse frequency j of a rotary dim d: theta^(-2j / d), in f64.
double default_inv_freq(double theta, int64_t j, int64_t d);

// The rope dict HF reads: a non-empty legacy rope_scaling replaces rope_parameters; nullptr when
// the config has neither.
const nlohmann::json* rope_dict(const nlohmann::json& text);

// Sets c.rope_type, c.rope_inv_freq, c.rope_attention_factor and c.position_limit from the rope
// dict (nullptr: default RoPE). Needs c.rope_theta, c.rotary_dim and c.max_position_embeddings.
// Unknown types (dynamic, longrope, llama3) and out-of-range parameters are errors naming the
// field.
void parse_rope_scaling(const nlohmann::json* rope, ModelConfig& c, const Reader& r);

} // namespace ninfer::io
