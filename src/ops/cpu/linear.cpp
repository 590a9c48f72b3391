// Implements ops/linear.h on the CPU. Reference: the dot-product loop in f64. Fast: OpenBLAS
// sgemm (y = x w^T), which threads itself.
#include <cblas.h>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {

void linear(CpuMode mode, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate) {
    const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
    if (T == 0 || N == 0) return;
    if (mode == CpuMode::Fast) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f,
                    x.ptr<float>(), int(x.stride[0]), w.ptr<float>(), int(K),
                    accumulate ? 1.0f : 0.0f, y.ptr<float>(), int(y.stride[0]));
        return;
    }
    for (int64_t t = 0; t < T; ++t) {
        const float* xr = row_f32(x, t);
        float* yr = row_f32(y, t);
        for (int64_t n = 0; n < N; ++n) {
            const float* wr = w.ptr<float>() + n * K;
            double sum = accumulate ? double(yr[n]) : 0.0;
            for (int64_t k = 0; k < K; ++k) sum += double(xr[k]) * double(wr[k]);
            yr[n] = float(sum);
        }
    }
}

} // namespace ninfer::ops::cpu
