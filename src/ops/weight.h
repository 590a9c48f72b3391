// WeightView: a weight matrix [N, K] (or a stack of them, [E, N, K]) as the ops that multiply by
// weights take it (linear, rms_norm_linear, moe_block):
//   - dense: w in the compute dtype (F32 or BF16), scale empty;
//   - block-wise fp8, the official Qwen FP8 layout (model/fp8.h) kept resident:
//       W[.., n, k] = e4m3(w[.., n, k]) * scale[.., n / block_rows, k / block_cols]
//     w: F8E4M3 codes [.., N, K] contiguous; scale: F32 [.., ceil(N / block_rows),
//     ceil(K / block_cols)] contiguous (partial edge blocks);
//   - groupwise integers, ninfer's W8/Q4 layout (model/groupwise.h) kept resident:
//       W[.., n, k] = q[.., n, k] * scale[.., n, k / group_size]
//     w: the codes, I8 [.., N, K] (group_bits 8) or U8 [.., N, ceil(K / 2)] (group_bits 4, two
//     codes a byte, low nibble first, each stored as q + 8), contiguous; scale: F16 or F32
//     [.., N, ceil(K / group_size)] contiguous. `cols` is K, the logical last dim: size(dim)
//     reports it, not the packed size.
// The reference for every quantized route is the dense op on the dequantized weight (f32 products
// of the code and its scale: exact for e4m3 codes (4 + 8 significant bits at most) and for
// integer codes with F16 scales (8 + 11); rounded once with F32 scales).
// Tensor and TensorView convert implicitly, so dense callers pass their weights unchanged.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ninfer::ops {

struct WeightView {
    TensorView w;
    TensorView scale; // empty for dense weights
    int64_t block_rows = 0, block_cols = 0;
    int group_bits = 0;     // groupwise: 8 or 4 (0: not groupwise)
    int64_t group_size = 0; // groupwise: input columns per scale
    int64_t cols = 0;       // groupwise: K, the logical last dim

    WeightView() = default;
    WeightView(const TensorView& dense) : w(dense) {}
    WeightView(const Tensor& dense) : w(dense.view()) {}
    static WeightView fp8(const TensorView& codes, const TensorView& scale, int64_t block_rows,
                          int64_t block_cols) {
        WeightView v(codes);
        v.scale = scale;
        v.block_rows = block_rows;
        v.block_cols = block_cols;
        return v;
    }

    static WeightView grouped(const TensorView& codes, const TensorView& scale, int bits,
                              int64_t group_size, int64_t cols) {
        WeightView v(codes);
        v.scale = scale;
        v.group_bits = bits;
        v.group_size = group_size;
        v.cols = cols;
        return v;
    }

    bool is_fp8() const { return w.dtype == DType::F8E4M3; }
    bool is_grouped() const { return group_bits != 0; }
    bool is_quantized() const { return is_fp8() || is_grouped(); }
    // The logical size (a 4-bit weight's last dim is its column count, not its packed bytes).
    int64_t size(int dim) const {
        const int d = dim < 0 ? w.ndim + dim : dim;
        return is_grouped() && d == w.ndim - 1 ? cols : w.size(dim);
    }
    int64_t nbytes() const { return w.nbytes() + (is_quantized() ? scale.nbytes() : 0); }
    // Expert e of a stack [E, N, K] as a 2-D weight [N, K] (the scale's matching slice).
    WeightView expert(int64_t e) const;
    // Rows [begin, begin + count) of a 2-D weight; for fp8, begin must be a multiple of
    // block_rows (the scale rows of a partial last block are shared); groupwise scales are per
    // row, so any rows.
    WeightView rows(int64_t begin, int64_t count) const;
};

// Code c of one row of groupwise codes (the layout above): an int8, or nibble c (low first) less 8.
inline int groupwise_code(const uint8_t* row, int64_t c, int bits) {
    return bits == 8 ? int(int8_t(row[c])) : int((row[c / 2] >> (4 * (c % 2))) & 0xF) - 8;
}

// The dense F32 weight of a host fp8 or groupwise weight (the CPU reference: dequantize, then
// dense); a dense weight is returned as a view of itself (no copy).
struct HostDense {
    Tensor storage; // empty when the weight was dense already
    TensorView view;
};
HostDense dense_on_host(const WeightView& w);

// Checks a quantized weight's codes and scale: the dtypes, contiguity and shapes above; errors
// name `op` and `what`.
void check_weight(const char* op, const char* what, const WeightView& w);
// The arguments of a dequantization of w (2-D or 3-D, fp8 or groupwise) into out, checked:
// check_weight, out a contiguous BF16 tensor of w's logical shape on its device, and used (may be
// empty: every expert) I32 [E] flags on that device, for 3-D weights only.
void check_dequantize_args(const char* op, const WeightView& w, const TensorView& out,
                           const TensorView& used);

} // namespace ninfer::ops
