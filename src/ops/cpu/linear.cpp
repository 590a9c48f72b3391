// Implements ops/linear.h on the CPU. Reference: the dot-product loop in f64. Fast: OpenBLAS
// sgemm (y = x w^T), which threads itself. Also the W8A8 emulation's activation quantizer.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
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

// CUDA's W8A8 activation quantization (linear_fp8_w8a8.cu's quantize_rows_fp8, moe_w8a8.cu's slot
// rows: fp8_codes.cuh's quantize_group4_e4m3) on the host, for ExecContext::cpu_w8a8.
void quantize_rows_e4m3(float* x, int64_t rows, int64_t cols, int64_t row_stride, int64_t block) {
    for (int64_t r = 0; r < rows; ++r) {
        float* row = x + r * row_stride;
        for (int64_t begin = 0; begin < cols; begin += block) {
            const int64_t end = std::min(cols, begin + block);
            float amax = 0.0f;
            for (int64_t c = begin; c < end; ++c) amax = std::max(amax, std::fabs(row[c]));
            // 448: e4m3's largest finite value; 1e-12 keeps an all-zero block's scale finite.
            const float scale = std::max(amax, 1e-12f) / 448.0f;
            for (int64_t c = begin; c < end; ++c)
                row[c] = fp8_e4m3_to_float(float_to_fp8_e4m3(row[c] / scale)) * scale;
        }
    }
}

} // namespace ninfer::ops::cpu
