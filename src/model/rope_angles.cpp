#include "model/rope_angles.h"

#include <cmath>

#include "io/rope_scaling.h"

namespace ninfer::model {

void rope_angle_tables(const io::ModelConfig& c, int64_t rows,
                       const std::function<int64_t(int64_t t, int64_t j)>& position,
                       std::vector<float>& cos, std::vector<float>& sin) {
    const int64_t half = c.rotary_dim / 2;
    std::vector<float> inv(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j)
        inv[size_t(j)] = scaled_rope(c) ? c.rope_inv_freq[size_t(j)]
                                        : float(io::default_inv_freq(c.rope_theta, j, c.rotary_dim));
    const float factor = float(c.rope_attention_factor);
    cos.resize(size_t(rows * half));
    sin.resize(size_t(rows * half));
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < half; ++j) {
            const float angle = float(position(t, j)) * inv[size_t(j)];
            cos[size_t(t * half + j)] = float(std::cos(double(angle))) * factor;
            sin[size_t(t * half + j)] = float(std::sin(double(angle))) * factor;
        }
}

} // namespace ninfer::model
