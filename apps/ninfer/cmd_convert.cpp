// ninfer convert: quantize a checkpoint (model/convert_fp8.h).
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "model/convert_fp8.h"

namespace ninfer::app {
namespace {

struct ConvertOptions {
    std::string model, out, to = "fp8", scale_dtype = "bf16";
    int64_t block = 128;
};

int convert(const ConvertOptions& o) {
    model::Fp8ConvertOptions f;
    f.block = o.block;
    f.scale_dtype = o.scale_dtype == "f32" ? DType::F32 : o.scale_dtype == "f16" ? DType::F16
                                                                                  : DType::BF16;
    const model::Fp8ConvertReport r = model::convert_to_fp8(o.model, o.out, f);
    std::printf("ninfer: %s -> %s: %lld weights to fp8 (blocks %lld x %lld, %s scales), %lld "
                "tensors copied, %.2f GB -> %.2f GB in %d file%s\n",
                o.model.c_str(), o.out.c_str(), (long long)r.quantized, (long long)o.block,
                (long long)o.block, o.scale_dtype.c_str(), (long long)r.copied,
                double(r.bytes_in) / 1e9, double(r.bytes_out) / 1e9, r.shards,
                r.shards == 1 ? "" : "s");
    return 0;
}

} // namespace

Action add_convert_command(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    app.add_option("--model", o->model, "Checkpoint directory to quantize (bf16, f16 or f32)")
        ->required()
        ->check(CLI::ExistingDirectory);
    app.add_option("--out", o->out, "Output directory")->required();
    app.add_option("--to", o->to,
                   "Format: fp8 (block-wise e4m3 in the official Qwen FP8 layout)")
        ->check(CLI::IsMember({"fp8"}));
    app.add_option("--block", o->block, "Block edge of the fp8 scales (Qwen: 128)")
        ->check(CLI::PositiveNumber);
    app.add_option("--scale-dtype", o->scale_dtype, "bf16 (as Qwen's), f16 or f32")
        ->check(CLI::IsMember({"bf16", "f16", "f32"}));
    return [o] { return convert(*o); };
}

} // namespace ninfer::app
