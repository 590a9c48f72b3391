// Implements ops/rope_table.h on the CPU.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/vision_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc>
void rope_table_rows(CpuMode mode, const TensorView& x, const TensorView& cos,
                     const TensorView& sin, int64_t rotary_dim) {
    const int64_t T = x.size(0), nH = x.size(1), half = rotary_dim / 2;
    for_each_row(
        mode, T,
        [&](int64_t t) {
            const float* c = cos.ptr<float>() + t * half;
            const float* s = sin.ptr<float>() + t * half;
            for (int64_t h = 0; h < nH; ++h) {
                float* xh = x.ptr<float>() + x.offset(t, h);
                for (int64_t i = 0; i < half; ++i) {
                    const Acc a = xh[i], b = xh[i + half], ci = c[i], si = s[i];
                    // Each product rounded before the sum, as HF's q * cos + rotate_half(q) * sin.
                    const Acc ac = a * ci, bs = b * si, bc = b * ci, as = a * si;
                    xh[i] = float(ac - bs);
                    xh[i + half] = float(bc + as);
                }
            }
        },
        4 * nH * half);
}

} // namespace

void rope_table(CpuMode mode, const TensorView& x, const TensorView& cos, const TensorView& sin,
                int64_t rotary_dim) {
    if (mode == CpuMode::Reference)
        rope_table_rows<double>(mode, x, cos, sin, rotary_dim);
    else
        rope_table_rows<float>(mode, x, cos, sin, rotary_dim);
}

} // namespace ninfer::ops::cpu
