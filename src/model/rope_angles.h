// RoPE angle tables on the host, for the composed RoPE path (ops/rope_table.h): mRoPE's 3-axis
// positions and scaled RoPE (linear, YaRN: io/rope_scaling.h).
//   inv[j] = c.rope_inv_freq[j] when set, else f32(rope_theta^(-2j / rotary_dim)) (as ops/rope.h);
//   angle(t, j) = f32(position(t, j)) * inv[j] in f32 (HF: inv_freq @ position_ids in f32);
//   cos[t, j] = f32(cos(angle)) * attention_factor, sin likewise (HF's attention_scaling),
//   for t < rows, j < rotary_dim / 2.
#pragma once

#include <functional>
#include <vector>

#include "io/hf_config.h"

namespace ninfer::model {

// Whether the config's RoPE needs the tables for every batch (a scaled rope_type): its inverse
// frequencies or its factor differ from what the fused attention_prep computes from rope_theta.
inline bool scaled_rope(const io::ModelConfig& c) {
    return !c.rope_inv_freq.empty();
}

void rope_angle_tables(const io::ModelConfig& c, int64_t rows,
                       const std::function<int64_t(int64_t t, int64_t j)>& position,
                       std::vector<float>& cos, std::vector<float>& sin);

} // namespace ninfer::model
