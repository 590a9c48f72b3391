#include "model/convert.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/fp8.h"
#include "model/groupwise.h"

namespace ninfer::model {
namespace {

namespace fs = std::filesystem;

// Files of at most this many bytes; larger checkpoints are sharded (as HF's 5 GB default).
constexpr int64_t kShardBytes = int64_t(5) << 30;

// The 2-D weights the FP8 releases quantize (not the vision tower's).
bool quantized_name(const std::string& name) {
    static const std::regex re(
        R"((self_attn\.(q|k|v|o)_proj|linear_attn\.(in_proj_qkv|in_proj_z|out_proj)|)"
        R"(mlp\.(gate|up|down)_proj|shared_expert\.(gate|up|down)_proj|)"
        R"(experts\.\d+\.(gate|up|down)_proj)\.weight$)");
    return name.rfind("model.visual.", 0) != 0 && std::regex_search(name, re);
}

// One output tensor and where its values come from.
struct Source {
    const io::TensorEntry* entry = nullptr;
    enum class Kind { Copy, Weight, Scale } kind = Kind::Copy;
    int64_t row_begin = 0, rows = 0, cols = 0;  // the 2-D slice of entry (fused experts: one)
    const io::TensorEntry* fp8_scale = nullptr; // an fp8 source weight's weight_scale_inv
};

// The options with their per-format defaults filled in.
struct Resolved {
    QuantFormat format;
    int64_t block, group;
    DType scale_dtype;
    bool fp8() const { return format == QuantFormat::Fp8; }
    int bits() const { return format == QuantFormat::W8 ? 8 : 4; }
    // The scale tensor beside a weight: the official fp8 name, or ninfer_groupwise's.
    const char* scale_suffix() const { return fp8() ? "_scale_inv" : "_scale"; }
};

Resolved resolve(const ConvertOptions& o) {
    Resolved r{o.format, o.block, o.group, DType::BF16};
    if (!r.fp8() && r.group == 0) r.group = o.format == QuantFormat::W8 ? 64 : 32;
    r.scale_dtype = o.scale_dtype.value_or(r.fp8() ? DType::BF16 : DType::F16);
    require(r.block >= 1, "--block must be positive");
    require(r.fp8() || r.group >= 1, "--group must be positive");
    require(r.scale_dtype == DType::F32 || r.scale_dtype == DType::BF16 ||
                r.scale_dtype == DType::F16,
            "the scale dtype must be f32, bf16 or f16");
    return r;
}

// One quantized weight's stored tensors, made once for the weight and its scale.
struct Quantized {
    std::vector<uint8_t> weight, scale;
};

class Plan {
public:
    // fp8_block: the source's weight_block_size when it is an fp8 checkpoint (converted to
    // w8/q4 from its exact dequantization), else null.
    Plan(const io::SafetensorsCheckpoint& ck, const Resolved& o, const int64_t* fp8_block)
        : opt_(o), ck_(ck), fp8_block_(fp8_block) {
        for (const auto& [name, e] : ck.entries()) add(name, e);
    }

    const std::map<std::string, io::TensorSpec>& specs() const { return specs_; }
    int64_t quantized() const { return quantized_; }
    int64_t copied() const { return copied_; }
    std::set<std::string> kept_linear_modules() const { return kept_; }

    std::vector<uint8_t> bytes(const std::string& name) {
        const Source& s = sources_.at(name);
        const io::TensorEntry& e = *s.entry;
        if (s.kind == Source::Kind::Copy) {
            const auto* p = static_cast<const uint8_t*>(e.data);
            return std::vector<uint8_t>(p, p + e.nbytes);
        }
        const std::string weight =
            s.kind == Source::Kind::Weight
                ? name
                : name.substr(0, name.size() - std::string(opt_.scale_suffix()).size());
        if (cached_name_ != weight) { // the weight comes first in name order, then its scale
            std::vector<float> w(size_t(s.rows * s.cols));
            if (s.fp8_scale) {
                w = dequantize_fp8(e, *s.fp8_scale, fp8_block_[0], fp8_block_[1]);
            } else {
                const int64_t elem = dtype_size(e.dtype);
                convert_to_f32(static_cast<const uint8_t*>(e.data) + s.row_begin * s.cols * elem,
                               e.dtype, w.data(), s.rows * s.cols);
            }
            cached_ = quantize(weight, w.data(), s.rows, s.cols);
            cached_name_ = weight;
        }
        return s.kind == Source::Kind::Weight ? cached_.weight : cached_.scale;
    }

private:
    Quantized quantize(const std::string& name, const float* w, int64_t rows, int64_t cols) const {
        if (opt_.fp8()) {
            Fp8Block b = quantize_fp8(w, rows, cols, opt_.block, opt_.block, opt_.scale_dtype);
            return {std::move(b.weight), std::move(b.scale)};
        }
        GroupwiseTensor g =
            quantize_groupwise(w, rows, cols, opt_.bits(), opt_.group, opt_.scale_dtype, name);
        return {std::move(g.codes), std::move(g.scale)};
    }

    void add_quantized(const std::string& name, const io::TensorEntry& e, int64_t row_begin,
                       int64_t rows, int64_t cols) {
        const std::string scale = name + opt_.scale_suffix();
        const int64_t selem = dtype_size(opt_.scale_dtype);
        if (opt_.fp8()) {
            const int64_t sr = (rows + opt_.block - 1) / opt_.block;
            const int64_t sc = (cols + opt_.block - 1) / opt_.block;
            specs_[name] = {"F8_E4M3", {rows, cols}, rows * cols};
            specs_[scale] = {dtype_name(opt_.scale_dtype), {sr, sc}, sr * sc * selem};
        } else {
            const std::vector<int64_t> cs = groupwise_code_shape({rows, cols}, opt_.bits());
            const std::vector<int64_t> ss = groupwise_scale_shape({rows, cols}, opt_.group);
            specs_[name] = {dtype_name(groupwise_code_dtype(opt_.bits())), cs,
                            cs[0] * cs[1]};
            specs_[scale] = {dtype_name(opt_.scale_dtype), ss, ss[0] * ss[1] * selem};
        }
        sources_[name] = {&e, Source::Kind::Weight, row_begin, rows, cols};
        sources_[scale] = {&e, Source::Kind::Scale, row_begin, rows, cols};
        ++quantized_;
    }

    // An fp8 source: its F8_E4M3 weights become w8/q4 from their dequantization; their scales
    // and static activation scales are consumed. True when `name` was handled here.
    bool add_from_fp8(const std::string& name, const io::TensorEntry& e) {
        if (!fp8_block_) return false;
        auto ends = [&](const std::string& suffix) {
            return name.size() > suffix.size() &&
                   name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        if (ends(".input_scale")) return true;
        if (ends("_scale_inv")) {
            const io::TensorEntry* w = ck_.find(name.substr(0, name.size() - 10));
            return w && w->dtype_name == "F8_E4M3";
        }
        if (e.dtype_name != "F8_E4M3") return false;
        const io::TensorEntry* scale = ck_.find(name + "_scale_inv");
        if (!scale) fail_invalid("fp8 tensor '", name, "' has no scale '", name, "_scale_inv'");
        require(e.shape.size() == 2, "fp8 tensor '", name, "' has shape ", e.shape_string(),
                "; block-wise fp8 weights are 2-D");
        add_quantized(name, e, 0, e.shape[0], e.shape[1]);
        sources_[name].fp8_scale = scale;
        sources_[name + opt_.scale_suffix()].fp8_scale = scale;
        return true;
    }

    void add(const std::string& name, const io::TensorEntry& e) {
        if (add_from_fp8(name, e)) return;
        const bool floating = e.dtype_known && is_float(e.dtype);
        if (!floating &&
            (e.dtype_name == "F8_E4M3" || e.dtype_name == "I8" || e.dtype_name == "U8"))
            fail_invalid("tensor '", name, "' is already ", e.dtype_name,
                         ": the checkpoint is quantized");
        // Fused 3-D experts ([E, 2I, H] gate|up, [E, H, I] down): per expert, as FP8 releases.
        static const std::regex fused(R"(^(.*mlp\.experts\.)(gate_up_proj|down_proj)$)");
        std::smatch m;
        if (floating && e.shape.size() == 3 && std::regex_match(name, m, fused)) {
            const int64_t E = e.shape[0], R = e.shape[1], C = e.shape[2];
            for (int64_t x = 0; x < E; ++x) {
                const std::string p = m[1].str() + std::to_string(x) + ".";
                if (m[2] == "down_proj") {
                    add_quantized(p + "down_proj.weight", e, x * R, R, C);
                } else {
                    require(R % 2 == 0, "fused gate_up_proj '", name, "' has an odd row count");
                    add_quantized(p + "gate_proj.weight", e, x * R, R / 2, C);
                    add_quantized(p + "up_proj.weight", e, x * R + R / 2, R / 2, C);
                }
            }
            return;
        }
        if (floating && e.shape.size() == 2 && quantized_name(name)) {
            add_quantized(name, e, 0, e.shape[0], e.shape[1]);
            return;
        }
        specs_[name] = {e.dtype_name, e.shape, e.nbytes};
        sources_[name] = {&e, Source::Kind::Copy, 0, 0, 0};
        ++copied_;
        const bool norm = name.find("norm") != std::string::npos;
        if (e.shape.size() == 2 && !norm && name.size() > 7 &&
            name.compare(name.size() - 7, 7, ".weight") == 0)
            kept_.insert(name.substr(0, name.size() - 7));
    }

    Resolved opt_;
    const io::SafetensorsCheckpoint& ck_;
    const int64_t* fp8_block_;
    std::map<std::string, io::TensorSpec> specs_;
    std::map<std::string, Source> sources_;
    std::set<std::string> kept_;
    int64_t quantized_ = 0, copied_ = 0;
    std::string cached_name_;
    Quantized cached_;
};

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    if (!in) fail(ErrorCategory::Io, "cannot read ", p.string());
    return nlohmann::json::parse(in);
}

} // namespace

ConvertReport convert_checkpoint(const fs::path& src, const fs::path& out,
                                 const ConvertOptions& options) {
    const Resolved o = resolve(options);
    const io::ModelConfig cfg = io::load_hf_config(src);
    // An fp8 checkpoint (an official release) converts to w8/q4 from its exact dequantization.
    if (cfg.fp8 && o.fp8()) fail_invalid(src.string(), " is already an fp8 checkpoint");
    if (cfg.group_bits)
        fail_invalid(src.string(), " is already a groupwise (", cfg.group_bits, "-bit) checkpoint");
    require(fs::weakly_canonical(src) != fs::weakly_canonical(out),
            "--out must differ from --model");
    const io::SafetensorsCheckpoint ck = io::SafetensorsCheckpoint::open(src);
    Plan plan(ck, o, cfg.fp8 ? cfg.fp8_block : nullptr);
    fs::create_directories(out);
    // Shards in name order, each at most kShardBytes (one file when it all fits).
    std::vector<std::map<std::string, io::TensorSpec>> shards(1);
    int64_t in_shard = 0, total = 0;
    for (const auto& [name, spec] : plan.specs()) {
        if (in_shard > 0 && in_shard + spec.nbytes > kShardBytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back()[name] = spec;
        in_shard += spec.nbytes;
        total += spec.nbytes;
    }
    nlohmann::ordered_json weight_map;
    int64_t written = 0;
    auto report = [&](int64_t done) {
        if (options.progress) options.progress(done, total);
    };
    report(0);
    for (size_t k = 0; k < shards.size(); ++k) {
        const std::string file =
            shards.size() == 1
                ? std::string("model.safetensors")
                : concat("model-", k + 1 < 10 ? "0000" : "000", k + 1, "-of-",
                         shards.size() < 10 ? "0000" : "000", shards.size(), ".safetensors");
        io::write_safetensors(out / file, shards[k], [&](const std::string& name) {
            std::vector<uint8_t> b = plan.bytes(name);
            written += int64_t(b.size());
            if (written < total) report(written);
            return b;
        });
        for (const auto& [name, spec] : shards[k]) weight_map[name] = file;
    }
    if (shards.size() > 1) {
        nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                        {"weight_map", weight_map}};
        std::ofstream(out / "model.safetensors.index.json") << index.dump(2) << "\n";
    }
    report(total);
    nlohmann::ordered_json config = read_json(fs::is_directory(src) ? src / "config.json" : src);
    const std::set<std::string> kept = plan.kept_linear_modules();
    if (o.fp8())
        config["quantization_config"] = {{"quant_method", "fp8"},
                                         {"fmt", "e4m3"},
                                         {"activation_scheme", "dynamic"},
                                         {"weight_block_size", {o.block, o.block}},
                                         {"modules_to_not_convert", kept}};
    else
        config["quantization_config"] = {{"quant_method", "ninfer_groupwise"},
                                         {"bits", o.bits()},
                                         {"group_size", o.group},
                                         {"modules_to_not_convert", kept}};
    // A source's own quantization_config inside text_config (an fp8 release's) is replaced too.
    if (config.contains("text_config") && config["text_config"].is_object())
        config["text_config"].erase("quantization_config");
    std::ofstream(out / "config.json") << config.dump(2) << "\n";
    for (const auto& f : fs::directory_iterator(src)) { // tokenizer, templates, generation config
        const std::string n = f.path().filename().string();
        const bool weights = f.path().extension() == ".safetensors" ||
                             n == "model.safetensors.index.json" || n == "config.json";
        if (f.is_regular_file() && !weights)
            fs::copy_file(f.path(), out / n, fs::copy_options::overwrite_existing);
    }
    ConvertReport r;
    r.group = o.fp8() ? 0 : o.group;
    r.scale_dtype = o.scale_dtype;
    r.quantized = plan.quantized();
    r.copied = plan.copied();
    for (const auto& [name, e] : ck.entries()) r.bytes_in += e.nbytes;
    r.bytes_out = total;
    r.shards = int(shards.size());
    return r;
}

} // namespace ninfer::model
