// Implements ops/rope.h on the CPU.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {

void rope(CpuMode mode, const TensorView& x, const TensorView& positions, int64_t rotary_dim,
          double theta) {
    const int64_t T = x.size(0), nH = x.size(1), half = rotary_dim / 2;
    // inv_freq as HF holds it: an f32 value (computed here in f64 and rounded once).
    std::vector<float> inv_freq(half);
    for (int64_t j = 0; j < half; ++j)
        inv_freq[j] = float(1.0 / std::pow(theta, double(2 * j) / double(rotary_dim)));
    const int32_t* pos = positions.ptr<int32_t>();
    for_each_row(mode, T, [&](int64_t t) {
        for (int64_t j = 0; j < half; ++j) {
            const float angle = float(pos[t]) * inv_freq[j]; // f32 product, as HF
            double c, s;
            if (mode == CpuMode::Reference) {
                c = std::cos(double(angle));
                s = std::sin(double(angle));
            } else {
                c = std::cos(angle);
                s = std::sin(angle);
            }
            for (int64_t h = 0; h < nH; ++h) {
                float* xh = x.ptr<float>() + x.offset(t, h);
                const double a = xh[j], b = xh[j + half];
                xh[j] = float(a * c - b * s);
                xh[j + half] = float(b * c + a * s);
            }
        }
    });
}

} // namespace ninfer::ops::cpu
