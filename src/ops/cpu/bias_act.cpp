// Implements ops/bias_act.h on the CPU.
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/vision_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc> Acc gelu_tanh(Acc x) {
    const Acc k = Acc(0.7978845608028654); // sqrt(2 / pi)
    return Acc(0.5) * x * (Acc(1) + std::tanh(k * (x + Acc(0.044715) * x * x * x)));
}

template <typename Acc> Acc gelu_erf(Acc x) {
    return Acc(0.5) * x * (Acc(1) + std::erf(x * Acc(0.7071067811865476))); // 1 / sqrt(2)
}

template <typename Acc>
void bias_act_rows(CpuMode mode, const TensorView& y, const TensorView& b, Activation act) {
    const int64_t R = y.size(0), N = y.size(1);
    const float* bp = b.ptr<float>();
    for_each_row(
        mode, R,
        [&](int64_t r) {
            float* yr = y.ptr<float>() + r * y.stride[0];
            if (act == Activation::GeluTanh)
                for (int64_t i = 0; i < N; ++i) yr[i] = float(gelu_tanh(Acc(yr[i]) + Acc(bp[i])));
            else if (act == Activation::GeluErf)
                for (int64_t i = 0; i < N; ++i) yr[i] = float(gelu_erf(Acc(yr[i]) + Acc(bp[i])));
            else
                for (int64_t i = 0; i < N; ++i) yr[i] = float(Acc(yr[i]) + Acc(bp[i]));
        },
        8 * N);
}

} // namespace

void bias_act(CpuMode mode, const TensorView& y, const TensorView& b, Activation act) {
    if (mode == CpuMode::Reference)
        bias_act_rows<double>(mode, y, b, act);
    else
        bias_act_rows<float>(mode, y, b, act);
}

} // namespace ninfer::ops::cpu
