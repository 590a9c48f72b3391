#include "model/fp8.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "core/error.h"

namespace ninfer::model {
namespace {

// Values below which one thread dequantizes a tensor alone (thread start-up would dominate).
constexpr int64_t kValuesPerThread = int64_t(1) << 20;

float bf16_to_float(uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

float f16_to_float(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = std::ldexp(float(man), -24); // subnormal: man * 2^-14 / 1024
    else if (exp == 31)
        v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(float(man | 0x400), exp - 25);
    return sign ? -v : v;
}

} // namespace

float fp8_e4m3_to_float(uint8_t bits) {
    const int sign = bits >> 7, exp = (bits >> 3) & 0xf, man = bits & 0x7;
    if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
    const float v = exp == 0 ? std::ldexp(float(man), -9)            // man / 8 * 2^-6
                             : std::ldexp(float(man | 0x8), exp - 10); // (8 + man) / 8 * 2^(e-7)
    return sign ? -v : v;
}

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
    std::vector<float> s(size_t(srows * scols));
    const auto* raw = static_cast<const uint8_t*>(scale.data);
    for (int64_t i = 0; i < srows * scols; ++i) {
        if (scale.dtype_name == "F32") {
            std::memcpy(&s[size_t(i)], raw + 4 * i, 4);
        } else if (scale.dtype_name == "BF16" || scale.dtype_name == "F16") {
            uint16_t h;
            std::memcpy(&h, raw + 2 * i, 2);
            s[size_t(i)] = scale.dtype_name == "BF16" ? bf16_to_float(h) : f16_to_float(h);
        } else {
            fail(ErrorCategory::Unsupported, "fp8 scale '", scale.name, "' has dtype ",
                 scale.dtype_name, "; expected F32, BF16 or F16");
        }
        if (!std::isfinite(s[size_t(i)]))
            fail_invalid("fp8 scale '", scale.name, "' holds a non-finite value");
    }
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
    // A real checkpoint dequantizes tens of billions of values at load: split big tensors
    // over the machine's threads (rows are independent).
    const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                              rows * cols / kValuesPerThread + 1);
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t)
        pool.emplace_back(rows_from, rows * t / threads, rows * (t + 1) / threads);
    rows_from(0, rows / threads);
    for (auto& th : pool) th.join();
    return out;
}

} // namespace ninfer::model
