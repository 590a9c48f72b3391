// The checkpoint binder of weight_loader.cpp: checks each tensor a binding takes (name, shape,
// dtype, fp8 or groupwise scale), fuses parts into device tensors in the compute dtype (quantized
// parts dequantized on the host), or keeps block-wise fp8 projections resident (fuse_weight), and
// makes seeded random weights for random models;
// reports the checkpoint bytes it has uploaded (ProgressMeter). Internal to the loader.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/fp8.h"
#include "model/groupwise.h"
#include "model/weight_loader.h"
#include "model/weights.h"
#include "ops/exec_context.h"
#include "ops/memory.h"

namespace ninfer::model::binding {

using io::LayerKind;
using io::ModelConfig;
using io::TensorEntry;
using Dims = std::vector<int64_t>;

inline std::string dims_string(const Dims& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

// Random values of a tensor by its role, chosen so a random model at true size stays finite:
// zero-centred norm weights near 0 (scale near 1), the gated norm near 1, decay parameters in
// HF's init ranges, everything else N(0, 0.02) (HF's initializer_range).
struct RandomInit {
    float mean, stddev;
};
inline RandomInit random_init_for(const std::string& name) {
    auto ends = [&](const char* suffix) {
        const std::string s(suffix);
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("linear_attn.norm.weight")) return {1.0f, 0.02f};
    if (name.rfind("model.visual.", 0) == 0) // plain LayerNorms (weight ~ 1) and biases
        return ends("norm.weight") || ends("norm1.weight") || ends("norm2.weight")
                   ? RandomInit{1.0f, 0.02f}
                   : RandomInit{0.0f, 0.02f};
    if (ends("norm.weight") || ends("layernorm.weight")) return {0.0f, 0.02f};
    if (ends("A_log")) return {1.5f, 0.5f}; // log of A in HF's U(0.01, 16) init
    if (ends("dt_bias")) return {0.0f, 0.5f};
    if (ends("conv1d.weight")) return {0.0f, 0.2f};
    return {0.0f, 0.02f};
}

// Whether a random fp8 model stores this projection as fp8: the official FP8 checkpoints'
// quantized set (attention q/k/v/o, GDN in_proj_qkv, in_proj_z and out_proj, and the dense,
// shared and routed MLP projections; never the router, shared_expert_gate, GDN in_proj_a/b).
inline bool quantized_in_official_layout(const std::string& name) {
    for (const char* suffix :
         {"in_proj_qkv.weight", "in_proj_z.weight", "linear_attn.out_proj.weight", "q_proj.weight",
          "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight", "up_proj.weight",
          "down_proj.weight", "experts.gate_up_proj", "experts.down_proj"}) {
        const std::string s(suffix);
        if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
            return name.rfind("mtp.fc", 0) != 0;
    }
    return false;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// The checkpoint bytes of every entry: what a load reads at most (LoadProgress's total).
inline int64_t checkpoint_bytes(const io::SafetensorsCheckpoint& ckpt) {
    int64_t n = 0;
    for (const auto& [name, entry] : ckpt.entries()) n += entry.nbytes;
    return n;
}

// Counts the checkpoint bytes uploaded so far and calls a LoadProgress no more often than every
// `step` bytes (a report per tensor would flood a printer with a 1000-tensor checkpoint), with
// one report at start() and one at finish(). Without a callback it does nothing.
class ProgressMeter {
public:
    ProgressMeter() = default;
    ProgressMeter(LoadProgress fn, int64_t total, int64_t step = kLoadProgressStepBytes)
        : fn_(std::move(fn)), total_(total), step_(step) {}

    void start() { report(0); }
    void add(int64_t bytes) {
        // Clamped: entries the binder never uploads (a saved tied lm_head) keep done below the
        // total, but a tensor bound twice must not carry it past.
        done_ = std::min(total_, done_ + bytes);
        if (done_ - reported_ >= step_ && done_ < total_) report(done_); // finish() says total
    }
    void finish() {
        done_ = total_;
        report(total_);
    }

private:
    void report(int64_t done) {
        if (!fn_) return;
        reported_ = done;
        fn_(done, total_);
    }

    LoadProgress fn_;
    int64_t total_ = 0, step_ = kLoadProgressStepBytes;
    int64_t done_ = 0, reported_ = 0;
};

class Binder {
public:
    Binder(const ModelConfig& c, const io::SafetensorsCheckpoint& ck, const ops::ExecContext& x,
           bool fp8_resident, const LoadProgress& on_progress = {},
           int64_t progress_step = kLoadProgressStepBytes)
        : cfg(c), ckpt(ck), ctx(x), dtype(x.dtype), keep_fp8(fp8_resident && c.fp8),
          progress(on_progress, checkpoint_bytes(ck), progress_step) {
        progress.start();
    }
    // Random mode: no checkpoint; every tensor gets seeded random values (random_init_for).
    Binder(const ModelConfig& c, const ops::ExecContext& x, uint64_t seed, bool fp8_resident)
        : cfg(c), ckpt(empty_checkpoint()), ctx(x), dtype(x.dtype),
          keep_fp8(fp8_resident && c.fp8), random(true), random_seed(seed) {}

    // Checks one checkpoint tensor and marks it consumed (random mode: a named placeholder).
    // A block-wise fp8 weight is checked with its weight_scale_inv; fuse() dequantizes it.
    const TensorEntry& take(const std::string& name, const Dims& shape) {
        if (random) {
            TensorEntry& e = placeholders.emplace_back();
            e.name = name;
            e.shape = shape;
            return e;
        }
        const TensorEntry* e = ckpt.find(name);
        if (!e)
            fail_invalid("checkpoint is missing tensor '", name, "' (expected ", dims_string(shape),
                         ")");
        const bool fp8 = e->dtype_known && e->dtype == DType::F8E4M3;
        if (is_grouped(*e)) {
            if (cfg.group_bits == 0)
                fail(ErrorCategory::Unsupported, "tensor '", name, "' is ", e->dtype_name,
                     " but config.json has no ninfer_groupwise quantization_config (integer "
                     "tensors load only as groupwise weights)");
            take_grouped(*e, shape);
            return *e;
        }
        if (!e->dtype_known || !(is_float(e->dtype) || fp8))
            fail(ErrorCategory::Unsupported, "tensor '", name, "' has dtype ", e->dtype_name,
                 "; expected F32, BF16, F16, block-wise F8_E4M3 or groupwise I8/U8 codes");
        if (fp8 && !cfg.fp8)
            fail_invalid("tensor '", name, "' is F8_E4M3 but config.json has no fp8 "
                         "quantization_config");
        if (e->shape != shape)
            fail_invalid("tensor '", name, "' has shape ", e->shape_string(), ", expected ",
                         dims_string(shape));
        if (fp8 && shape.size() != 2)
            fail_invalid("fp8 tensor '", name, "' has shape ", e->shape_string(),
                         "; block-wise fp8 weights are 2-D");
        if (fp8) {
            const TensorEntry& s = scale_of(*e);
            if (s.shape != Dims{ceil_div(shape[0], cfg.fp8_block[0]),
                                ceil_div(shape[1], cfg.fp8_block[1])})
                fail_invalid("fp8 scale '", s.name, "' has shape ", s.shape_string(),
                             ", expected [", ceil_div(shape[0], cfg.fp8_block[0]), ", ",
                             ceil_div(shape[1], cfg.fp8_block[1]), "] for weight ",
                             e->shape_string(), " in blocks of [", cfg.fp8_block[0], ", ",
                             cfg.fp8_block[1], "]");
            consumed.insert(s.name);
        }
        consumed.insert(name);
        return *e;
    }

    // A device tensor of shape dims in the compute dtype whose contents are the given tensors
    // concatenated in order (concatenation along dim 0, or of per-expert blocks, is
    // concatenation of flat buffers). fp8 and groupwise parts are dequantized on the host first.
    // zero_tail: dims may hold more than the parts (padding rows), and the rest is zeros.
    Tensor fuse(const Dims& dims, const std::vector<const TensorEntry*>& parts,
                bool zero_tail = false) {
        Tensor t =
            Tensor::empty(ops::device_allocator(ctx.device), dtype, dims.data(), int(dims.size()));
        TensorView flat = t.view().reshape({t.numel()});
        int64_t parts_numel = 0;
        for (const TensorEntry* p : parts) parts_numel += decoded_numel(*p);
        require(zero_tail ? parts_numel <= t.numel() : parts_numel == t.numel(),
                "internal: fused tensor size mismatch");
        if (parts_numel < t.numel())
            ops::fill_zero(ctx, flat.narrow(0, parts_numel, t.numel() - parts_numel));
        if (random) {
            const RandomInit init = random_init_for(parts.front()->name);
            ops::fill_random(ctx, flat.narrow(0, 0, parts_numel), seed_of(parts.front()->name),
                             init.mean, init.stddev);
            return t;
        }
        int64_t offset = 0;
        for (const TensorEntry* p : parts) {
            std::vector<float> values;
            TensorView src = TensorView::contiguous(const_cast<void*>(p->data), p->dtype,
                                                    Device::cpu(), {p->numel()});
            if (p->dtype == DType::F8E4M3)
                values = dequantize_fp8(*p, scale_of(*p), cfg.fp8_block[0], cfg.fp8_block[1]);
            if (is_grouped(*p))
                values = dequantize_groupwise(*p, group_scale_of(*p), logical_dims.at(p->name),
                                              cfg.group_bits, cfg.group_size);
            if (!values.empty())
                src = TensorView::contiguous(values.data(), DType::F32, Device::cpu(),
                                             {int64_t(values.size())});
            ops::upload(ctx, src, flat.narrow(0, offset, src.numel())); // staged: values may go
            offset += src.numel();
            progress.add(checkpoint_bytes_of(*p));
        }
        require(offset == parts_numel, "internal: fused tensor size mismatch");
        return t;
    }
    // Elements a part holds once decoded (groupwise codes: their weight's, not the packed bytes').
    int64_t decoded_numel(const TensorEntry& p) const {
        const auto logical = logical_dims.find(p.name);
        if (logical == logical_dims.end()) return p.numel();
        int64_t n = 1;
        for (int64_t d : logical->second) n *= d;
        return n;
    }
    Tensor load(const std::string& name, const Dims& shape) {
        return fuse(shape, {&take(name, shape)});
    }

    // Whether a part is (random mode: would be) a block-wise fp8 weight.
    bool is_fp8(const TensorEntry& e) const {
        return random ? cfg.fp8 && quantized_in_official_layout(e.name)
                      : e.dtype_known && e.dtype == DType::F8E4M3;
    }

    // Whether a part stays quantized on the device: fp8 with keep_fp8, groupwise with
    // keep_grouped (random mode: would be).
    bool stays_quantized(const TensorEntry& e) const {
        return (keep_fp8 && is_fp8(e)) || (keep_grouped && is_grouped_part(e));
    }
    bool is_grouped_part(const TensorEntry& e) const {
        return random ? cfg.group_bits != 0 && quantized_in_official_layout(e.name)
                      : is_grouped(e);
    }

    // A projection weight: resident groupwise codes and scales when keep_grouped and every part
    // is groupwise (groupwise scales are per row, so parts always concatenate);
    // resident fp8 (codes and F32 scales) when fp8 stays resident, every part is fp8 and the
    // parts' scale rows concatenate into the fused weight's (each part but the last of a stack
    // element spans whole row blocks); otherwise fuse() (dequantized).
    Weight fuse_weight(const Dims& dims, const std::vector<const TensorEntry*>& parts) {
        bool grouped = keep_grouped;
        for (const TensorEntry* p : parts) grouped = grouped && is_grouped_part(*p);
        if (grouped) return fuse_grouped(dims, parts);
        const int64_t B0 = cfg.fp8_block[0], B1 = cfg.fp8_block[1];
        const int64_t stacks = dims.size() == 3 ? dims[0] : 1;
        // Random mode fills the fused weight at once (one part names it): nothing to line up.
        bool fp8 = keep_fp8 && (random || int64_t(parts.size()) % stacks == 0);
        const size_t per_stack = std::max<size_t>(1, parts.size() / size_t(stacks));
        for (size_t i = 0; fp8 && i < parts.size(); ++i)
            fp8 = is_fp8(*parts[i]) &&
                  (random || (i + 1) % per_stack == 0 || parts[i]->shape[0] % B0 == 0);
        if (!fp8) return Weight(fuse(dims, parts));
        Weight w;
        w.block_rows = B0;
        w.block_cols = B1;
        Allocator& a = ops::device_allocator(ctx.device);
        const int64_t rows = dims[dims.size() - 2], cols = dims.back();
        w.w = Tensor::empty(a, DType::F8E4M3, dims.data(), int(dims.size()));
        Dims sdims = dims;
        sdims[sdims.size() - 2] = ceil_div(rows, B0);
        sdims.back() = ceil_div(cols, B1);
        w.scale = Tensor::empty(a, DType::F32, sdims.data(), int(sdims.size()));
        if (random) { // codes ~ N(0, 64) (within e4m3's +-448), one scale: W ~ N(0, stddev)
            const std::string& name = parts.front()->name;
            ops::fill_random(ctx, w.w, seed_of(name), 0.0f, 64.0f);
            ops::fill_random(ctx, w.scale, seed_of(name) + 1, random_init_for(name).stddev / 64.0f,
                             0.0f);
            return w;
        }
        TensorView codes = w.w.view().reshape({w.w.numel()});
        TensorView scales = w.scale.view().reshape({w.scale.numel()});
        int64_t code_at = 0, scale_at = 0;
        for (const TensorEntry* p : parts) {
            ops::upload(ctx, TensorView::contiguous(const_cast<void*>(p->data), DType::F8E4M3,
                                                    Device::cpu(), {p->numel()}),
                        codes.narrow(0, code_at, p->numel()));
            code_at += p->numel();
            std::vector<float> s = scale_values(scale_of(*p));
            ops::upload(ctx, TensorView::contiguous(s.data(), DType::F32, Device::cpu(),
                                                    {int64_t(s.size())}),
                        scales.narrow(0, scale_at, int64_t(s.size())));
            scale_at += int64_t(s.size());
            progress.add(checkpoint_bytes_of(*p));
        }
        require(code_at == w.w.numel() && scale_at == w.scale.numel(),
                "internal: fused fp8 weight size mismatch");
        return w;
    }
    Weight load_weight(const std::string& name, const Dims& shape) {
        return fuse_weight(shape, {&take(name, shape)});
    }

    // The groupwise parts as one resident weight of logical shape dims: codes and scales
    // concatenated in order. The scales stay F16 when every part's are F16, else become F32.
    Weight fuse_grouped(const Dims& dims, const std::vector<const TensorEntry*>& parts) {
        Weight w;
        w.group_bits = cfg.group_bits;
        w.group_size = cfg.group_size;
        w.cols = dims.back();
        Allocator& a = ops::device_allocator(ctx.device);
        const Dims cdims = groupwise_code_shape(dims, cfg.group_bits);
        const Dims sdims = groupwise_scale_shape(dims, cfg.group_size);
        bool f16 = !random;
        for (const TensorEntry* p : parts) f16 = f16 && group_scale_of(*p).dtype == DType::F16;
        w.w = Tensor::empty(a, groupwise_code_dtype(cfg.group_bits), cdims.data(),
                            int(cdims.size()));
        w.scale = Tensor::empty(a, f16 ? DType::F16 : DType::F32, sdims.data(), int(sdims.size()));
        if (random) { // random code bytes (as e4m3 bit patterns), one scale: W ~ N(0, stddev)
            const std::string& name = parts.front()->name;
            const TensorView bytes = TensorView::contiguous(w.w.view().data, DType::F8E4M3,
                                                            ctx.device, {w.w.numel()});
            ops::fill_random(ctx, bytes, seed_of(name), 0.0f, 64.0f);
            // Codes spread over about [-8, 8) (q4) or [-128, 128) (w8): std ~ range / sqrt(12).
            const float code_std = cfg.group_bits == 8 ? 74.0f : 4.6f;
            ops::fill_random(ctx, w.scale, seed_of(name) + 1,
                             random_init_for(name).stddev / code_std, 0.0f);
            return w;
        }
        TensorView codes = w.w.view().reshape({w.w.numel()});
        TensorView scales = w.scale.view().reshape({w.scale.numel()});
        int64_t code_at = 0, scale_at = 0;
        for (const TensorEntry* p : parts) {
            ops::upload(ctx, TensorView::contiguous(const_cast<void*>(p->data), p->dtype,
                                                    Device::cpu(), {p->numel()}),
                        codes.narrow(0, code_at, p->numel()));
            code_at += p->numel();
            const TensorEntry& s = group_scale_of(*p);
            std::vector<float> values = scale_values(s); // checked finite either way
            TensorView src =
                f16 ? TensorView::contiguous(const_cast<void*>(s.data), s.dtype, Device::cpu(),
                                             {s.numel()})
                    : TensorView::contiguous(values.data(), DType::F32, Device::cpu(),
                                             {s.numel()});
            ops::upload(ctx, src, scales.narrow(0, scale_at, s.numel()));
            scale_at += s.numel();
            progress.add(checkpoint_bytes_of(*p));
        }
        require(code_at == w.w.numel() && scale_at == w.scale.numel(),
                "internal: fused groupwise weight size mismatch");
        return w;
    }

    // Checks that every checkpoint tensor was bound, then reports the load complete.
    void finish() {
        for (const auto& [name, entry] : ckpt.entries()) {
            if (consumed.count(name)) continue;
            // Static fp8 activation scales: weights are dequantized, activations stay unscaled.
            if (cfg.fp8 && name.size() > 12 && name.compare(name.size() - 12, 12, ".input_scale") == 0)
                continue;
            fail_invalid("checkpoint has unexpected tensor '", name, "' ", entry.shape_string(),
                         " (not part of a ", cfg.model_type, " text model)");
        }
        progress.finish();
    }

    static const io::SafetensorsCheckpoint& empty_checkpoint() {
        static const io::SafetensorsCheckpoint none;
        return none;
    }

    // The bytes a bound part read from the checkpoint: its own, and its scale's when quantized.
    int64_t checkpoint_bytes_of(const TensorEntry& e) const {
        return e.nbytes + (e.dtype == DType::F8E4M3 ? scale_of(e).nbytes
                           : is_grouped(e)          ? group_scale_of(e).nbytes
                                                    : 0);
    }

    // Groupwise integer codes (model/groupwise.h): the dtype decides, then the config must agree.
    static bool is_grouped(const TensorEntry& e) {
        return e.dtype_known && (e.dtype == DType::I8 || e.dtype == DType::U8);
    }
    const TensorEntry& group_scale_of(const TensorEntry& e) const {
        const TensorEntry* s = ckpt.find(e.name + "_scale");
        if (!s) fail_invalid("groupwise tensor '", e.name, "' has no scale '", e.name, "_scale'");
        return *s;
    }
    // Checks groupwise codes of logical shape `shape` and their scale (dequantize_groupwise
    // checks the dtypes and values again when it runs); marks both consumed.
    void take_grouped(const TensorEntry& e, const Dims& shape) {
        if (shape.size() < 2)
            fail_invalid("tensor '", e.name, "' is ", e.dtype_name, " with shape ",
                         e.shape_string(), "; only weights of two or more dims are groupwise (",
                         dims_string(shape), " expected in a float dtype)");
        const DType want = groupwise_code_dtype(cfg.group_bits);
        const Dims code_shape = groupwise_code_shape(shape, cfg.group_bits);
        if (e.dtype != want || e.shape != code_shape)
            fail_invalid("groupwise tensor '", e.name, "' is ", e.dtype_name, " ",
                         e.shape_string(), ", expected ", dtype_name(want), " ",
                         dims_string(code_shape), " for ", cfg.group_bits, "-bit codes of a ",
                         dims_string(shape), " weight");
        const TensorEntry& s = group_scale_of(e);
        const Dims scale_shape = groupwise_scale_shape(shape, cfg.group_size);
        if (s.shape != scale_shape)
            fail_invalid("groupwise scale '", s.name, "' has shape ", s.shape_string(),
                         ", expected ", dims_string(scale_shape), " for a ", dims_string(shape),
                         " weight in groups of ", cfg.group_size);
        consumed.insert(s.name);
        consumed.insert(e.name);
        logical_dims[e.name] = shape;
    }

    const TensorEntry& scale_of(const TensorEntry& e) const {
        const TensorEntry* s = ckpt.find(e.name + "_scale_inv");
        if (!s) fail_invalid("fp8 tensor '", e.name, "' has no scale '", e.name, "_scale_inv'");
        return *s;
    }
    // A scale tensor as F32 values; F32, BF16 or F16 stored, every value finite.
    static std::vector<float> scale_values(const TensorEntry& s) {
        if (!s.dtype_known || !is_float(s.dtype) || s.dtype == DType::F64)
            fail(ErrorCategory::Unsupported, "scale '", s.name, "' has dtype ", s.dtype_name,
                 "; expected F32, BF16 or F16");
        std::vector<float> v(size_t(s.numel()));
        convert_to_f32(s.data, s.dtype, v.data(), s.numel());
        for (float x : v)
            if (!std::isfinite(x)) fail_invalid("scale '", s.name, "' holds a non-finite value");
        return v;
    }
    uint64_t seed_of(const std::string& name) const {
        return random_seed ^ std::hash<std::string>{}(name);
    }

    // Binds the tensors that follow on `to` (another device's context: an MlpPlacement's post-
    // attention blocks), until use() switches back.
    void use(const ops::ExecContext& to) {
        ctx = to;
        ops::bind_device(to);
    }

    const ModelConfig& cfg;
    const io::SafetensorsCheckpoint& ckpt;
    ops::ExecContext ctx; // where tensors are bound now (use)
    DType dtype;
    bool keep_fp8 = false;     // fp8 projections stay fp8 on the device (fuse_weight)
    bool keep_grouped = false; // groupwise projections stay groupwise (fuse_weight)
    bool random = false;
    uint64_t random_seed = 0;
    std::set<std::string> consumed;
    std::map<std::string, Dims> logical_dims; // groupwise codes: the weight's shape (take_grouped)
    std::deque<TensorEntry> placeholders;
    ProgressMeter progress; // silent in random mode (no callback)
};

} // namespace ninfer::model::binding
