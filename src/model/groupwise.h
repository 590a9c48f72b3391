// Groupwise integer weights: ninfer's open W8 and Q4 layout (`ninfer convert --to w8|q4`,
// docs/QUANTIZATION.md "Groupwise INT8 and 4-bit weights"). For a weight of logical shape
// [.., N, K] (the leading dims, if any, stack matrices):
//   W[.., n, k] = q[.., n, k] * s[.., n, k / G]
//   q: signed integer codes of `bits` bits, stored as
//        bits 8: I8 [.., N, K], two's complement;
//        bits 4: U8 [.., N, ceil(K / 2)], two codes a byte: element 2j in the low nibble, 2j + 1
//                in the high nibble, each stored as q + 8 (0..15); an odd K pads the last high
//                nibble with 8 (code 0);
//   s: the `<name>_scale` tensor [.., N, ceil(K / G)], F16 as ninfer writes it (BF16 and F32 are
//      read too); the last group of a row is partial when G does not divide K.
// Quantizer (deterministic; llama.cpp's Q8_0/Q4_0 rule): per group, m = the value of largest
// magnitude (the first on ties), s = scale_dtype(m / -2^(bits-1)) (a power-of-two division, exact
// in f32), q = clamp(round_half_to_even(w / s), -2^(bits-1), 2^(bits-1) - 1) with the division in
// double. m itself lands on -2^(bits-1): the signed scale spends the extra negative code on the
// group's extreme. A scale that rounds to 0 (an all-zero group) gives q = 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"

namespace ninfer::model {

// The group sizes and code widths the converter writes; the loader accepts any group >= 1.
inline constexpr int kGroupwiseBits[] = {4, 8};

// Shapes of the stored tensors for a weight of logical shape `dims` (rank >= 2).
std::vector<int64_t> groupwise_code_shape(const std::vector<int64_t>& dims, int bits);
std::vector<int64_t> groupwise_scale_shape(const std::vector<int64_t>& dims, int64_t group);
// The stored code dtype: I8 for 8 bits, U8 (packed pairs) for 4.
DType groupwise_code_dtype(int bits);

struct GroupwiseTensor {
    std::vector<uint8_t> codes; // groupwise_code_shape bytes
    std::vector<uint8_t> scale; // groupwise_scale_shape values in scale_dtype
};
// Quantizes w, `rows` rows of `cols` values (the stacked leading dims folded into rows). `name`
// is for errors: a non-finite weight, or a scale beyond scale_dtype's range.
GroupwiseTensor quantize_groupwise(const float* w, int64_t rows, int64_t cols, int bits,
                                   int64_t group, DType scale_dtype, const std::string& name);

// The weight of logical shape `dims` as F32 values, from its codes and scale entries. Errors name
// the tensors: a code or scale of the wrong dtype or shape, a non-finite scale.
std::vector<float> dequantize_groupwise(const io::TensorEntry& codes, const io::TensorEntry& scale,
                                        const std::vector<int64_t>& dims, int bits, int64_t group);

} // namespace ninfer::model
