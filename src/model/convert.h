// Quantizes a bf16/f16/f32 checkpoint (`ninfer convert --to fp8|w8|q4`). The weights the
// official FP8 releases quantize (attention q/k/v/o, GDN in_proj_qkv, in_proj_z and out_proj,
// dense/shared/routed MLP projections, those of the MTP layers too; never the vision tower) are
// quantized; fused 3-D experts are written per expert as 2-D tensors, as the FP8 releases store
// them; everything else is copied unchanged.
//   fp8: block-wise float8_e4m3fn with a `weight_scale_inv` (model/fp8.h's recipe), the official
//        Qwen FP8 layout, so a converted checkpoint loads through the same code as an official one;
//   w8, q4: groupwise 8- or 4-bit integer codes with a `weight_scale` per group of input columns
//        (model/groupwise.h), quant_method ninfer_groupwise.
// An fp8 checkpoint (an official release) converts to w8/q4: its fp8 weights are dequantized
// exactly (model/fp8.h) and quantized again, its scales and static activation scales dropped.
// config.json gains the quantization_config, other files (tokenizer, templates) are copied, and
// checkpoints over kShardBytes are sharded with an index. The output depends only on the input
// and the options (sorted names, deterministic quantizers): converting twice gives the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "core/dtype.h"

namespace ninfer::model {

enum class QuantFormat { Fp8, W8, Q4 };

struct ConvertOptions {
    QuantFormat format = QuantFormat::Fp8;
    int64_t block = 128; // fp8: weight_block_size [block, block]
    int64_t group = 0;   // w8/q4: input columns per scale; 0 = the default (w8: 64, q4: 32)
    // The scales' dtype: fp8 defaults to BF16 (as Qwen stores them), w8/q4 to F16.
    std::optional<DType> scale_dtype;
    // Told the output bytes written of their total: (0, total) first, then after each tensor,
    // (total, total) last. May be empty.
    std::function<void(int64_t done, int64_t total)> progress;
};

struct ConvertReport {
    int64_t quantized = 0, copied = 0; // tensors
    int64_t bytes_in = 0, bytes_out = 0;
    int shards = 0;
    int64_t group = 0; // w8/q4: the group size used
    DType scale_dtype = DType::BF16;
};

ConvertReport convert_checkpoint(const std::filesystem::path& src, const std::filesystem::path& out,
                                 const ConvertOptions& options);

} // namespace ninfer::model
