// WeightView: a weight matrix [N, K] (or a stack of them, [E, N, K]) as the ops that multiply by
// weights take it (linear, rms_norm_linear, moe_block):
//   - dense: w in the compute dtype (F32 or BF16), scale empty;
//   - block-wise fp8, the official Qwen FP8 layout (model/fp8.h) kept resident:
//       W[.., n, k] = e4m3(w[.., n, k]) * scale[.., n / block_rows, k / block_cols]
//     w: F8E4M3 codes [.., N, K] contiguous; scale: F32 [.., ceil(N / block_rows),
//     ceil(K / block_cols)] contiguous (partial edge blocks).
// The reference for every fp8 route is the dense op on the dequantized weight (f32 products of
// the code and its scale, which are exact in f32: 4 + 8 significant bits at most).
// Tensor and TensorView convert implicitly, so dense callers pass their weights unchanged.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ninfer::ops {

struct WeightView {
    TensorView w;
    TensorView scale; // empty for dense weights
    int64_t block_rows = 0, block_cols = 0;

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

    bool is_fp8() const { return w.dtype == DType::F8E4M3; }
    int64_t size(int dim) const { return w.size(dim); }
    int64_t nbytes() const { return w.nbytes() + (is_fp8() ? scale.nbytes() : 0); }
    // Expert e of a stack [E, N, K] as a 2-D weight [N, K] (the scale's matching slice).
    WeightView expert(int64_t e) const;
    // Rows [begin, begin + count) of a 2-D weight; for fp8, begin must be a multiple of
    // block_rows (the scale rows of a partial last block are shared).
    WeightView rows(int64_t begin, int64_t count) const;
};

// The dense F32 weight of a host fp8 weight (the CPU reference: dequantize, then dense); a dense
// weight is returned as a view of itself (no copy).
struct HostDense {
    Tensor storage; // empty when the weight was dense already
    TensorView view;
};
HostDense dense_on_host(const WeightView& w);

// Checks an fp8 weight's scale: F32, contiguous, the shape above; errors name `op` and `what`.
void check_weight(const char* op, const char* what, const WeightView& w);

} // namespace ninfer::ops
