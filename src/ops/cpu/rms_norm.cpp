// Implements ops/rms_norm.h and ops/gated_rms_norm.h on the CPU.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc>
void rms_norm_rows(CpuMode mode, const TensorView& x, const TensorView& w, float eps,
                   const TensorView& y, float weight_offset) {
    const int64_t R = row_count(x), H = row_width(x);
    const float* wp = w.ptr<float>();
    for_each_row(mode, R, [&](int64_t r) {
        const float* xr = row_f32(x, r);
        float* yr = row_f32(y, r);
        Acc sum = 0;
        for (int64_t i = 0; i < H; ++i) sum += Acc(xr[i]) * Acc(xr[i]);
        Acc scale = Acc(1) / std::sqrt(sum / Acc(H) + Acc(eps));
        for (int64_t i = 0; i < H; ++i)
            yr[i] = float(Acc(xr[i]) * scale * (Acc(weight_offset) + Acc(wp[i])));
    });
}

template <typename Acc>
void gated_rms_norm_rows(CpuMode mode, const TensorView& x, const TensorView& z,
                         const TensorView& w, float eps, const TensorView& y) {
    const int64_t R = row_count(x), D = row_width(x);
    const float* wp = w.ptr<float>();
    for_each_row(mode, R, [&](int64_t r) {
        const float* xr = row_f32(x, r);
        const float* zr = row_f32(z, r);
        float* yr = row_f32(y, r);
        Acc sum = 0;
        for (int64_t i = 0; i < D; ++i) sum += Acc(xr[i]) * Acc(xr[i]);
        Acc scale = Acc(1) / std::sqrt(sum / Acc(D) + Acc(eps));
        for (int64_t i = 0; i < D; ++i)
            yr[i] = float(Acc(wp[i]) * (Acc(xr[i]) * scale) * silu(Acc(zr[i])));
    });
}

} // namespace

void rms_norm(CpuMode mode, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset) {
    if (mode == CpuMode::Reference)
        rms_norm_rows<double>(mode, x, w, eps, y, weight_offset);
    else
        rms_norm_rows<float>(mode, x, w, eps, y, weight_offset);
}

void gated_rms_norm(CpuMode mode, const TensorView& x, const TensorView& z, const TensorView& w,
                    float eps, const TensorView& y) {
    if (mode == CpuMode::Reference)
        gated_rms_norm_rows<double>(mode, x, z, w, eps, y);
    else
        gated_rms_norm_rows<float>(mode, x, z, w, eps, y);
}

} // namespace ninfer::ops::cpu
