#include "ops/weight.h"

#include <vector>

#include "core/error.h"

namespace ninfer::ops {
namespace {

int64_t blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
}

} // namespace

WeightView WeightView::expert(int64_t e) const {
    require(w.ndim == 3, "WeightView::expert: a stack [E, N, K] expected, got ", w.describe());
    WeightView v(w.narrow(0, e, 1).reshape({w.size(1), w.size(2)}));
    if (is_grouped())
        return grouped(v.w, scale.narrow(0, e, 1).reshape({scale.size(1), scale.size(2)}),
                       group_bits, group_size, cols);
    if (is_fp8()) {
        v.scale = scale.narrow(0, e, 1).reshape({scale.size(1), scale.size(2)});
        v.block_rows = block_rows;
        v.block_cols = block_cols;
    }
    return v;
}

WeightView WeightView::rows(int64_t begin, int64_t count) const {
    require(w.ndim == 2, "WeightView::rows: a 2-D weight expected, got ", w.describe());
    WeightView v(w.narrow(0, begin, count));
    if (is_grouped())
        return grouped(v.w, scale.narrow(0, begin, count), group_bits, group_size, cols);
    if (is_fp8()) {
        require(begin % block_rows == 0, "WeightView::rows: fp8 rows from ", begin,
                " do not start a ", block_rows, "-row scale block");
        v.scale = scale.narrow(0, begin / block_rows, blocks(count, block_rows));
        v.block_rows = block_rows;
        v.block_cols = block_cols;
    }
    return v;
}

namespace {

// dense_on_host for a groupwise weight: code x scale in f32 (model/groupwise.h's layout).
HostDense grouped_on_host(const WeightView& w) {
    const int n = w.w.ndim;
    const int64_t C = w.cols, row_bytes = w.w.size(n - 1), groups = w.scale.size(n - 1);
    const int64_t rows = w.w.numel() / row_bytes;
    std::vector<int64_t> dims(w.w.shape.begin(), w.w.shape.begin() + n);
    dims.back() = C;
    HostDense out;
    out.storage = Tensor::empty(cpu_allocator(), DType::F32, dims.data(), n);
    out.view = out.storage.view();
    std::vector<float> s(size_t(rows * groups));
    convert_to_f32(w.scale.data, w.scale.dtype, s.data(), int64_t(s.size()));
    const auto* q = w.w.ptr<uint8_t>();
    float* d = out.storage.ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = q + r * row_bytes;
        for (int64_t c = 0; c < C; ++c) {
            d[r * C + c] = float(groupwise_code(row, c, w.group_bits)) *
                           s[size_t(r * groups + c / w.group_size)];
        }
    }
    return out;
}

} // namespace

HostDense dense_on_host(const WeightView& w) {
    if (!w.is_quantized()) return {Tensor(), w.w};
    if (w.is_grouped()) {
        check_weight("dense_on_host", "w", w);
        require(w.w.device.is_cpu(), "dense_on_host: the groupwise weight is not in host memory");
        return grouped_on_host(w);
    }
    check_weight("dense_on_host", "w", w);
    require(w.w.device.is_cpu(), "dense_on_host: the fp8 weight is not in host memory");
    const int n = w.w.ndim;
    const int64_t R = w.w.size(n - 2), C = w.w.size(n - 1), stacks = w.w.numel() / (R * C);
    const int64_t sr = w.scale.size(n - 2), sc = w.scale.size(n - 1);
    HostDense out;
    out.storage = Tensor::empty(cpu_allocator(), DType::F32, w.w.shape.data(), n);
    out.view = out.storage.view();
    const auto* q = w.w.ptr<uint8_t>();
    const float* s = w.scale.ptr<float>();
    float* d = out.storage.ptr<float>();
    float table[256];
    for (int b = 0; b < 256; ++b) table[b] = fp8_e4m3_to_float(uint8_t(b));
    for (int64_t e = 0; e < stacks; ++e)
        for (int64_t r = 0; r < R; ++r) {
            const float* srow = s + (e * sr + r / w.block_rows) * sc;
            const int64_t base = (e * R + r) * C;
            for (int64_t c = 0; c < C; ++c) d[base + c] = table[q[base + c]] * srow[c / w.block_cols];
        }
    return out;
}

namespace {

void check_grouped(const char* op, const char* what, const WeightView& w) {
    require(w.group_bits == 8 || w.group_bits == 4, op, ": groupwise weight '", what,
            "' has ", w.group_bits, " bits (8 or 4)");
    require(w.group_size >= 1 && w.cols >= 1, op, ": groupwise weight '", what,
            "' has no group size or columns");
    const DType codes = w.group_bits == 8 ? DType::I8 : DType::U8;
    const int64_t row_bytes = w.group_bits == 8 ? w.cols : (w.cols + 1) / 2;
    require(w.w.dtype == codes && w.w.is_contiguous() && w.w.ndim >= 2 &&
                w.w.size(w.w.ndim - 1) == row_bytes,
            op, ": groupwise weight '", what, "' needs contiguous ", dtype_name(codes), " codes [.., N, ",
            row_bytes, "] for ", w.cols, " columns, got ", w.w.describe());
    const int n = w.w.ndim;
    require((w.scale.dtype == DType::F16 || w.scale.dtype == DType::F32) &&
                w.scale.is_contiguous() && w.scale.ndim == n && w.scale.device == w.w.device,
            op, ": groupwise weight '", what,
            "' needs a contiguous F16 or F32 scale of its rank on its device, got ",
            w.scale.describe());
    for (int d = 0; d + 1 < n; ++d)
        require(w.scale.size(d) == w.w.size(d), op, ": groupwise weight '", what, "' scale ",
                w.scale.describe(), " does not match ", w.w.describe());
    require(w.scale.size(n - 1) == blocks(w.cols, w.group_size), op, ": groupwise weight '", what,
            "' scale ", w.scale.describe(), " is not [.., ceil(", w.cols, " / ", w.group_size,
            ")]");
}

} // namespace

void check_weight(const char* op, const char* what, const WeightView& w) {
    if (w.is_grouped()) return check_grouped(op, what, w);
    if (!w.is_fp8()) {
        require(w.scale.empty(), op, ": dense weight '", what, "' carries a scale");
        return;
    }
    require(w.block_rows > 0 && w.block_cols > 0, op, ": fp8 weight '", what,
            "' has no block size");
    require(w.w.is_contiguous() && w.w.ndim >= 2, op, ": fp8 weight '", what,
            "' must be contiguous, got ", w.w.describe());
    require(w.scale.dtype == DType::F32 && w.scale.is_contiguous() && w.scale.ndim == w.w.ndim &&
                w.scale.device == w.w.device,
            op, ": fp8 weight '", what, "' needs a contiguous F32 scale of its rank on its device, got ",
            w.scale.describe());
    const int n = w.w.ndim;
    for (int d = 0; d + 2 < n; ++d)
        require(w.scale.size(d) == w.w.size(d), op, ": fp8 weight '", what, "' scale ",
                w.scale.describe(), " does not match ", w.w.describe());
    require(w.scale.size(n - 2) == blocks(w.w.size(n - 2), w.block_rows) &&
                w.scale.size(n - 1) == blocks(w.w.size(n - 1), w.block_cols),
            op, ": fp8 weight '", what, "' scale ", w.scale.describe(), " is not [ceil(",
            w.w.size(n - 2), " / ", w.block_rows, "), ceil(", w.w.size(n - 1), " / ",
            w.block_cols, ")]");
}

void check_dequantize_args(const char* op, const WeightView& w, const TensorView& out,
                           const TensorView& used) {
    check_weight(op, "w", w);
    const int nd = w.w.ndim;
    bool same_shape = out.ndim == nd;
    for (int d = 0; d < nd && same_shape; ++d) same_shape = out.size(d) == w.size(d);
    require(out.dtype == DType::BF16 && same_shape && out.is_contiguous() &&
                out.device == w.w.device,
            op, ": out must be a contiguous BF16 tensor of w's logical shape on its device, got ",
            out.describe(), " for ", w.w.describe());
    if (used.empty()) return;
    const int64_t E = nd == 3 ? w.size(0) : 1;
    require(nd == 3 && used.dtype == DType::I32 && used.ndim == 1 && used.size(0) == E &&
                used.is_contiguous() && used.device == w.w.device,
            op, ": used must be I32 [", E, "] on the weight's device (3-D weights only), got ",
            used.describe());
}

} // namespace ninfer::ops
