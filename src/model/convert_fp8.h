// Converts a bf16/f16/f32 checkpoint to the official Qwen FP8 layout (`ninfer convert --to fp8`):
// the weights the FP8 releases quantize (attention q/k/v/o, GDN in_proj_qkv, in_proj_z and
// out_proj, dense/shared/routed MLP projections, those of the MTP layers too) become block-wise
// float8_e4m3fn with a weight_scale_inv (model/fp8.h's recipe); fused 3-D experts are written per
// expert as 2-D tensors, as the FP8 releases store them; everything else is copied unchanged.
// config.json gains the quantization_config, other files (tokenizer, templates) are copied, and
// checkpoints over kShardBytes are sharded with an index. The output depends only on the input
// and the options (sorted names, a deterministic quantizer): converting twice gives the same
// bytes, and the result loads through the same code as an official FP8 checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/dtype.h"

namespace ninfer::model {

struct Fp8ConvertOptions {
    int64_t block = 128;            // weight_block_size [block, block]
    DType scale_dtype = DType::BF16; // Qwen stores the scales in BF16
};

struct Fp8ConvertReport {
    int64_t quantized = 0, copied = 0; // tensors
    int64_t bytes_in = 0, bytes_out = 0;
    int shards = 0;
};

Fp8ConvertReport convert_to_fp8(const std::filesystem::path& src, const std::filesystem::path& out,
                                const Fp8ConvertOptions& options);

} // namespace ninfer::model
