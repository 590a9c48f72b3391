// Implements ops/layer_norm.h on the CPU: two passes over each row (mean, then the variance of
// the centred values), then the affine map.
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/vision_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc>
void layer_norm_rows(CpuMode mode, const TensorView& x, const TensorView& w, const TensorView& b,
                     float eps, const TensorView& y) {
    const int64_t R = row_count(x), K = row_width(x);
    const float* wp = w.ptr<float>();
    const float* bp = b.ptr<float>();
    for_each_row(
        mode, R,
        [&](int64_t r) {
            const float* xr = row_f32(x, r);
            float* yr = row_f32(y, r);
            Acc sum = 0;
            for (int64_t i = 0; i < K; ++i) sum += Acc(xr[i]);
            const Acc mean = sum / Acc(K);
            Acc sq = 0;
            for (int64_t i = 0; i < K; ++i) sq += (Acc(xr[i]) - mean) * (Acc(xr[i]) - mean);
            const Acc inv = Acc(1) / std::sqrt(sq / Acc(K) + Acc(eps));
            // Element i is read before it is written: y may alias x.
            for (int64_t i = 0; i < K; ++i)
                yr[i] = float((Acc(xr[i]) - mean) * inv * Acc(wp[i]) + Acc(bp[i]));
        },
        4 * K);
}

} // namespace

void layer_norm(CpuMode mode, const TensorView& x, const TensorView& w, const TensorView& b,
                float eps, const TensorView& y) {
    if (mode == CpuMode::Reference)
        layer_norm_rows<double>(mode, x, w, b, eps, y);
    else
        layer_norm_rows<float>(mode, x, w, b, eps, y);
}

} // namespace ninfer::ops::cpu
