#include "model/groupwise.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/parallel_rows.h"
#include "ops/weight.h"

namespace ninfer::model {
namespace {

std::string dims_text(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

void check_format(int bits, int64_t group) {
    require(bits == 4 || bits == 8, "groupwise weights have 4 or 8 bits, not ", bits);
    require(group >= 1, "the group size must be positive, not ", group);
}

int64_t leading_rows(const std::vector<int64_t>& dims) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    return rows;
}

} // namespace

std::vector<int64_t> groupwise_code_shape(const std::vector<int64_t>& dims, int bits) {
    require(dims.size() >= 2, "groupwise weights are at least 2-D");
    std::vector<int64_t> s = dims;
    if (bits == 4) s.back() = (dims.back() + 1) / 2;
    return s;
}

std::vector<int64_t> groupwise_scale_shape(const std::vector<int64_t>& dims, int64_t group) {
    require(dims.size() >= 2, "groupwise weights are at least 2-D");
    std::vector<int64_t> s = dims;
    s.back() = (dims.back() + group - 1) / group;
    return s;
}

DType groupwise_code_dtype(int bits) {
    return bits == 8 ? DType::I8 : DType::U8;
}

GroupwiseTensor quantize_groupwise(const float* w, int64_t rows, int64_t cols, int bits,
                                   int64_t group, DType scale_dtype, const std::string& name) {
    check_format(bits, group);
    require(scale_dtype == DType::F16 || scale_dtype == DType::BF16 || scale_dtype == DType::F32,
            "groupwise scales are f16, bf16 or f32");
    const int64_t groups = (cols + group - 1) / group;
    const int64_t row_bytes = bits == 8 ? cols : (cols + 1) / 2;
    const int qmin = -(1 << (bits - 1)), qmax = (1 << (bits - 1)) - 1;
    GroupwiseTensor out;
    out.codes.assign(size_t(rows * row_bytes), bits == 8 ? 0 : 0x88);
    std::vector<float> scales(size_t(rows * groups));
    // Rows are independent (each writes its own codes and scales): split over threads, the same
    // bytes whatever the split. The first bad value in row order is the error reported.
    parallel_rows(rows, rows * cols, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t j0 = g * group, j1 = std::min(cols, j0 + group);
                float m = 0;
                for (int64_t j = j0; j < j1; ++j) {
                    const float v = w[i * cols + j];
                    if (!std::isfinite(v))
                        fail_invalid("tensor '", name, "' holds a non-finite value at [", i, ", ",
                                     j, "]");
                    if (std::fabs(v) > std::fabs(m)) m = v;
                }
                float s = m / float(qmin); // a power of two: exact
                float stored = s;
                if (scale_dtype != DType::F32) {
                    uint16_t h;
                    convert_from_f32(&s, &h, scale_dtype, 1);
                    convert_to_f32(&h, scale_dtype, &stored, 1);
                }
                if (!std::isfinite(stored))
                    fail_invalid("tensor '", name, "': the scale of row ", i, ", group ", g,
                                 " overflows ", dtype_name(scale_dtype), " (largest value ", m,
                                 ")");
                scales[size_t(i * groups + g)] = stored;
                for (int64_t j = j0; j < j1; ++j) {
                    int q = 0;
                    if (stored != 0.0f) {
                        const double r = std::nearbyint(double(w[i * cols + j]) / double(stored));
                        q = int(std::clamp(r, double(qmin), double(qmax)));
                    }
                    uint8_t* row = &out.codes[size_t(i * row_bytes)];
                    if (bits == 8) {
                        row[j] = uint8_t(int8_t(q));
                    } else {
                        const uint8_t nib = uint8_t(q + 8);
                        uint8_t& b = row[j / 2];
                        b = (j % 2 == 0) ? uint8_t((b & 0xF0) | nib)
                                         : uint8_t((b & 0x0F) | (nib << 4));
                    }
                }
            }
    });
    out.scale.resize(scales.size() * size_t(dtype_size(scale_dtype)));
    convert_from_f32(scales.data(), out.scale.data(), scale_dtype, int64_t(scales.size()));
    return out;
}

std::vector<float> dequantize_groupwise(const io::TensorEntry& codes, const io::TensorEntry& scale,
                                        const std::vector<int64_t>& dims, int bits, int64_t group) {
    check_format(bits, group);
    const std::vector<int64_t> code_shape = groupwise_code_shape(dims, bits);
    const std::vector<int64_t> scale_shape = groupwise_scale_shape(dims, group);
    const DType code_dtype = groupwise_code_dtype(bits);
    if (!codes.dtype_known || codes.dtype != code_dtype || codes.shape != code_shape)
        fail_invalid("groupwise tensor '", codes.name, "' is ", codes.dtype_name, " ",
                     codes.shape_string(), ", expected ", dtype_name(code_dtype), " ",
                     dims_text(code_shape), " for ", bits, "-bit codes of a ", dims_text(dims),
                     " weight");
    if (!scale.dtype_known ||
        !(scale.dtype == DType::F16 || scale.dtype == DType::BF16 || scale.dtype == DType::F32))
        fail(ErrorCategory::Unsupported, "groupwise scale '", scale.name, "' has dtype ",
             scale.dtype_name, "; expected F16, BF16 or F32");
    if (scale.shape != scale_shape)
        fail_invalid("groupwise scale '", scale.name, "' has shape ", scale.shape_string(),
                     ", expected ", dims_text(scale_shape), " for a ", dims_text(dims),
                     " weight in groups of ", group);
    const int64_t rows = leading_rows(dims), cols = dims.back();
    const int64_t groups = scale_shape.back();
    const int64_t row_bytes = code_shape.back();
    std::vector<float> s(size_t(rows * groups));
    convert_to_f32(scale.data, scale.dtype, s.data(), int64_t(s.size()));
    for (float v : s)
        if (!std::isfinite(v))
            fail_invalid("groupwise scale '", scale.name, "' holds a non-finite value");
    std::vector<float> out(size_t(rows * cols));
    const auto* q = static_cast<const uint8_t*>(codes.data);
    parallel_rows(rows, rows * cols, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const uint8_t* row = q + i * row_bytes;
            const float* srow = &s[size_t(i * groups)];
            float* dst = &out[size_t(i * cols)];
            for (int64_t j = 0; j < cols; ++j) {
                dst[j] = float(ops::groupwise_code(row, j, bits)) * srow[j / group];
            }
        }
    });
    return out;
}

} // namespace ninfer::model
