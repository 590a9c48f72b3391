// Block-wise FP8 weights as the official Qwen FP8 checkpoints store them (vLLM's and
// transformers' fp8 loaders): w[i, j] = e4m3(q[i, j]) * s[i / B0, j / B1], with q a
// float8_e4m3fn [rows, cols] tensor and s its weight_scale_inv, [ceil(rows / B0), ceil(cols / B1)]
// in F32, BF16 or F16 (edge blocks are partial). Dequantized at load to the compute dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "io/safetensors.h"

namespace ninfer::model {

// The e4m3 conversions live in core/dtype.h.
using ninfer::float_to_fp8_e4m3;
using ninfer::fp8_e4m3_to_float;

// The dequantized weight [rows, cols] as F32. Errors name the tensors: a scale of the wrong
// shape or dtype, or a non-finite scale.
std::vector<float> dequantize_fp8(const io::TensorEntry& weight, const io::TensorEntry& scale,
                                  int64_t block_rows, int64_t block_cols);


// Block-wise quantization, the official checkpoints' recipe: per block, scale = amax / 448,
// rounded to scale_dtype (F32, BF16 or F16), then q = e4m3(w / scale). Deterministic.
struct Fp8Block {
    std::vector<uint8_t> weight; // [rows, cols] e4m3 codes
    std::vector<uint8_t> scale;  // [scale_rows, scale_cols] in scale_dtype
    int64_t scale_rows = 0, scale_cols = 0;
};
Fp8Block quantize_fp8(const float* w, int64_t rows, int64_t cols, int64_t block_rows,
                      int64_t block_cols, DType scale_dtype);

} // namespace ninfer::model
