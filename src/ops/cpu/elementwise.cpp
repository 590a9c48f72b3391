// Implements ops/elementwise.h on the CPU.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc, typename Fn>
void binary_rows(CpuMode mode, const TensorView& a, const TensorView& b, const TensorView& out,
                 Fn fn) {
    const int64_t R = row_count(out), N = row_width(out);
    for_each_row(mode, R, [&](int64_t r) {
        const float* ar = row_f32(a, r);
        const float* br = row_f32(b, r);
        float* o = row_f32(out, r);
        for (int64_t i = 0; i < N; ++i) o[i] = float(fn(Acc(ar[i]), Acc(br[i])));
    });
}

template <typename Acc>
void silu_mul_rows(CpuMode mode, const TensorView& gate_up, const TensorView& out) {
    const int64_t R = row_count(out), N = row_width(out);
    for_each_row(mode, R, [&](int64_t r) {
        const float* g = row_f32(gate_up, r);
        float* o = row_f32(out, r);
        for (int64_t i = 0; i < N; ++i) o[i] = float(silu(Acc(g[i])) * Acc(g[N + i]));
    });
}

} // namespace

void add(CpuMode mode, const TensorView& a, const TensorView& b, const TensorView& out) {
    auto fn = [](auto x, auto y) { return x + y; };
    if (mode == CpuMode::Reference)
        binary_rows<double>(mode, a, b, out, fn);
    else
        binary_rows<float>(mode, a, b, out, fn);
}

void sigmoid_mul(CpuMode mode, const TensorView& x, const TensorView& gate, const TensorView& out) {
    auto fn = [](auto v, auto g) { return v * sigmoid(g); };
    if (mode == CpuMode::Reference)
        binary_rows<double>(mode, x, gate, out, fn);
    else
        binary_rows<float>(mode, x, gate, out, fn);
}

void silu_mul(CpuMode mode, const TensorView& gate_up, const TensorView& out) {
    if (mode == CpuMode::Reference)
        silu_mul_rows<double>(mode, gate_up, out);
    else
        silu_mul_rows<float>(mode, gate_up, out);
}

} // namespace ninfer::ops::cpu
