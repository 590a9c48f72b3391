#include "common/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace ninfer::test {

Tensor random_tensor(std::initializer_list<int64_t> dims, uint64_t seed, float scale) {
    Tensor t = Tensor::empty(cpu_allocator(), DType::F32, dims);
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = dist(gen);
    return t;
}

Tensor zeros(std::initializer_list<int64_t> dims, DType dtype) {
    return Tensor::empty(cpu_allocator(), dtype, dims);
}

std::vector<double> to_doubles(const TensorView& v) {
    std::vector<double> out;
    out.reserve(size_t(v.numel()));
    const Shape& s = v.shape;
    for (int64_t a = 0; a < (v.ndim > 0 ? s[0] : 1); ++a)
        for (int64_t b = 0; b < (v.ndim > 1 ? s[1] : 1); ++b)
            for (int64_t c = 0; c < (v.ndim > 2 ? s[2] : 1); ++c)
                for (int64_t d = 0; d < (v.ndim > 3 ? s[3] : 1); ++d) {
                    const int64_t off =
                        v.offset(a, v.ndim > 1 ? b : 0, v.ndim > 2 ? c : 0, v.ndim > 3 ? d : 0);
                    switch (v.dtype) {
                    case DType::I32:
                        out.push_back(double(v.ptr<int32_t>()[off]));
                        break;
                    case DType::U8:
                        out.push_back(double(v.ptr<uint8_t>()[off]));
                        break;
                    case DType::I64:
                        out.push_back(double(v.ptr<int64_t>()[off]));
                        break;
                    default:
                        out.push_back(double(load_as_float(v.data, v.dtype, off)));
                    }
                }
    return out;
}

Tensor clone(const TensorView& v) {
    Tensor t = Tensor::empty(cpu_allocator(), v.dtype, v.shape.data(), v.ndim);
    std::vector<double> values = to_doubles(v);
    for (size_t i = 0; i < values.size(); ++i) {
        switch (v.dtype) {
        case DType::F32:
            t.ptr<float>()[i] = float(values[i]);
            break;
        case DType::I32:
            t.ptr<int32_t>()[i] = int32_t(values[i]);
            break;
        case DType::U8:
            t.ptr<uint8_t>()[i] = uint8_t(values[i]);
            break;
        default:
            std::memcpy(t.ptr<char>() + i * dtype_size(v.dtype),
                        static_cast<const char*>(v.data) + i * dtype_size(v.dtype),
                        size_t(dtype_size(v.dtype)));
        }
    }
    return t;
}

::testing::AssertionResult near(const TensorView& actual, const TensorView& expected,
                                const Tolerance& tol) {
    if (actual.numel() != expected.numel())
        return ::testing::AssertionFailure()
               << "size mismatch: " << actual.describe() << " vs " << expected.describe();
    std::vector<double> a = to_doubles(actual), b = to_doubles(expected);
    double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
    size_t worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
            if (std::isnan(a[i]) != std::isnan(b[i]) || (!std::isnan(a[i]) && a[i] != b[i]))
                return ::testing::AssertionFailure()
                       << "non-finite mismatch at " << i << ": " << a[i] << " vs " << b[i];
            continue;
        }
        const double d = std::fabs(a[i] - b[i]);
        diff2 += d * d;
        ref2 += b[i] * b[i];
        if (d > max_diff) {
            max_diff = d;
            worst = i;
        }
        max_ref = std::max(max_ref, std::fabs(b[i]));
    }
    const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    const double cap = tol.max_abs * std::max(1.0, max_ref);
    if (rel <= tol.rel_l2 && max_diff <= cap) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "tolerance " << tol.name << " exceeded: rel_l2 " << rel << " (limit " << tol.rel_l2
           << "), max |diff| " << max_diff << " at " << worst << " (" << a[worst] << " vs "
           << b[worst] << ", cap " << cap << ")";
}

double max_gap_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double scale = 0, gap = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, double(std::fabs(want[i])));
        gap = std::max(gap, double(std::fabs(got[i] - want[i])));
    }
    return gap / scale;
}

std::string fixtures_dir() {
    return NINFER_FIXTURES_DIR;
}

std::filesystem::path scratch_path(const std::string& name) {
    return std::filesystem::temp_directory_path() /
           (name + "_" + std::to_string(static_cast<long>(::getpid())));
}

} // namespace ninfer::test
