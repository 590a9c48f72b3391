#include "model/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "model/parallel_rows.h"

namespace ninfer::model {
std::vector<float> dequantize_fp8(const io::TensorEntry& weight, const io::TensorEntry& scale,
                                  int64_t block_rows, int64_t block_cols) {
    require(weight.shape.size() == 2, "fp8 tensor '", weight.name, "' has shape ",
            weight.shape_string(), "; block-wise fp8 weights are 2-D");
    const int64_t rows = weight.shape[0], cols = weight.shape[1];
    const int64_t srows = (rows + block_rows - 1) / block_rows;
    const int64_t scols = (cols + block_cols - 1) / block_cols;
    if (scale.shape != std::vector<int64_t>{srows, scols})
        fail_invalid("fp8 scale '", scale.name, "' has shape ", scale.shape_string(),
                     ", expected [", srows, ", ", scols, "] for weight ", weight.shape_string(),
                     " in blocks of [", block_rows, ", ", block_cols, "]");
    require(weight.nbytes == rows * cols, "fp8 tensor '", weight.name, "' holds ", weight.nbytes,
            " bytes for ", rows * cols, " values");
    const bool float_scale = scale.dtype_name == "F32" || scale.dtype_name == "BF16" ||
                             scale.dtype_name == "F16";
    if (!float_scale)
        fail(ErrorCategory::Unsupported, "fp8 scale '", scale.name, "' has dtype ",
             scale.dtype_name, "; expected F32, BF16 or F16");
    const DType sdt = scale.dtype_name == "F32"    ? DType::F32
                      : scale.dtype_name == "BF16" ? DType::BF16
                                                   : DType::F16;
    std::vector<float> s(size_t(srows * scols));
    convert_to_f32(scale.data, sdt, s.data(), srows * scols);
    for (float v : s)
        if (!std::isfinite(v)) fail_invalid("fp8 scale '", scale.name, "' holds a non-finite value");
    float table[256];
    for (int b = 0; b < 256; ++b) table[b] = fp8_e4m3_to_float(uint8_t(b));
    std::vector<float> out(size_t(rows * cols));
    const auto* q = static_cast<const uint8_t*>(weight.data);
    auto rows_from = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float* srow = &s[size_t((i / block_rows) * scols)];
            for (int64_t j = 0; j < cols; ++j)
                out[size_t(i * cols + j)] = table[q[i * cols + j]] * srow[j / block_cols];
        }
    };
    parallel_rows(rows, rows * cols, rows_from);
    return out;
}

Fp8Block quantize_fp8(const float* w, int64_t rows, int64_t cols, int64_t block_rows,
                      int64_t block_cols, DType scale_dtype) {
    Fp8Block out;
    out.scale_rows = (rows + block_rows - 1) / block_rows;
    out.scale_cols = (cols + block_cols - 1) / block_cols;
    out.weight.resize(size_t(rows * cols));
    std::vector<float> scale(size_t(out.scale_rows * out.scale_cols));
    for (int64_t bi = 0; bi < out.scale_rows; ++bi)
        for (int64_t bj = 0; bj < out.scale_cols; ++bj) {
            const int64_t i1 = std::min(rows, (bi + 1) * block_rows);
            const int64_t j1 = std::min(cols, (bj + 1) * block_cols);
            float amax = 0;
            for (int64_t i = bi * block_rows; i < i1; ++i)
                for (int64_t j = bj * block_cols; j < j1; ++j)
                    amax = std::max(amax, std::fabs(w[i * cols + j]));
            // amax maps to e4m3's largest value; the scale is rounded to its stored dtype first,
            // so dequantization (fp8 * stored scale) is what the quantizer aimed at.
            float sc = std::max(amax, 1e-12f) / 448.0f;
            if (scale_dtype != DType::F32) {
                uint16_t h;
                convert_from_f32(&sc, &h, scale_dtype, 1);
                convert_to_f32(&h, scale_dtype, &sc, 1);
            }
            scale[size_t(bi * out.scale_cols + bj)] = sc;
            for (int64_t i = bi * block_rows; i < i1; ++i)
                for (int64_t j = bj * block_cols; j < j1; ++j)
                    out.weight[size_t(i * cols + j)] = float_to_fp8_e4m3(w[i * cols + j] / sc);
        }
    out.scale.resize(size_t(out.scale_rows * out.scale_cols) * size_t(dtype_size(scale_dtype)));
    convert_from_f32(scale.data(), out.scale.data(), scale_dtype,
                     out.scale_rows * out.scale_cols);
    return out;
}

} // namespace ninfer::model
