// ninfer convert: quantize a checkpoint (model/convert.h).
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "engine_flags.h"
#include "load_progress.h"
#include "model/convert.h"

namespace ninfer::app {
namespace {

struct ConvertOptions {
    std::string model, out, to = "fp8", scale_dtype;
    int64_t block = 128, group = 0;
};

DType scale_dtype_named(const std::string& name) {
    return name == "f32" ? DType::F32 : name == "f16" ? DType::F16 : DType::BF16;
}

int convert(const ConvertOptions& o) {
    model::ConvertOptions c;
    c.format = o.to == "w8"   ? model::QuantFormat::W8
               : o.to == "q4" ? model::QuantFormat::Q4
                              : model::QuantFormat::Fp8;
    require(c.format != model::QuantFormat::Fp8 || o.group == 0,
            "--group sets the group of --to w8|q4; fp8 has --block");
    c.block = o.block;
    c.group = o.group;
    if (!o.scale_dtype.empty()) c.scale_dtype = scale_dtype_named(o.scale_dtype);
    // A line on stderr for outputs of 1 GiB or more (the load's printer, other words).
    c.progress = stderr_load_progress({"converting weights", "converted"});
    const model::ConvertReport r = model::convert_checkpoint(o.model, o.out, c);
    const std::string layout =
        c.format == model::QuantFormat::Fp8
            ? concat("blocks ", o.block, " x ", o.block)
            : concat(c.format == model::QuantFormat::W8 ? "8" : "4", "-bit, groups of ", r.group);
    std::printf("ninfer: %s -> %s: %lld weights to %s (%s, %s scales), %lld tensors copied, "
                "%.2f GB -> %.2f GB in %d file%s\n",
                o.model.c_str(), o.out.c_str(), (long long)r.quantized, o.to.c_str(),
                layout.c_str(), dtype_name(r.scale_dtype), (long long)r.copied,
                double(r.bytes_in) / 1e9, double(r.bytes_out) / 1e9, r.shards,
                r.shards == 1 ? "" : "s");
    return 0;
}

} // namespace

Action add_convert_command(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    app.add_option("--model", o->model,
                   "Checkpoint directory to quantize (bf16, f16 or f32), or ORG/NAME in the "
                   "Hugging Face cache")
        ->transform(hub_model_path())
        ->required()
        ->check(CLI::ExistingDirectory);
    app.add_option("--out", o->out, "Output directory")->required();
    app.add_option("--to", o->to,
                   "Format: fp8 (block-wise e4m3 in the official Qwen FP8 layout), w8 or q4 "
                   "(groupwise 8- or 4-bit integers, docs/QUANTIZATION.md)")
        ->check(CLI::IsMember({"fp8", "w8", "q4"}));
    app.add_option("--block", o->block, "Block edge of the fp8 scales (Qwen: 128)")
        ->check(CLI::PositiveNumber);
    app.add_option("--group", o->group, "Input columns per scale for w8/q4 (default: w8 64, q4 32)")
        ->check(CLI::PositiveNumber);
    app.add_option("--scale-dtype", o->scale_dtype,
                   "bf16, f16 or f32 (default: fp8 bf16 as Qwen's, w8/q4 f16)")
        ->check(CLI::IsMember({"bf16", "f16", "f32"}));
    return [o] { return convert(*o); };
}

} // namespace ninfer::app
