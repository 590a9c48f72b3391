#include "model/weight_loader.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/fp8.h"
#include "ops/memory.h"

namespace ninfer::model {
namespace {

using io::LayerKind;
using io::ModelConfig;
using io::TensorEntry;
using Dims = std::vector<int64_t>;

std::string dims_string(const Dims& d) {
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
RandomInit random_init_for(const std::string& name) {
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
bool quantized_in_official_layout(const std::string& name) {
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

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

class Binder {
public:
    Binder(const ModelConfig& c, const io::SafetensorsCheckpoint& ck, const ops::ExecContext& x,
           bool fp8_resident)
        : cfg(c), ckpt(ck), ctx(x), dtype(x.dtype), keep_fp8(fp8_resident && c.fp8) {}
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
        if (!e->dtype_known || !(is_float(e->dtype) || fp8))
            fail(ErrorCategory::Unsupported, "tensor '", name, "' has dtype ", e->dtype_name,
                 "; expected F32, BF16, F16 or block-wise F8_E4M3");
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
    // concatenation of flat buffers). fp8 parts are dequantized on the host first.
    Tensor fuse(const Dims& dims, const std::vector<const TensorEntry*>& parts) {
        Tensor t =
            Tensor::empty(ops::device_allocator(ctx.device), dtype, dims.data(), int(dims.size()));
        if (random) {
            const RandomInit init = random_init_for(parts.front()->name);
            ops::fill_random(ctx, t, seed_of(parts.front()->name), init.mean, init.stddev);
            return t;
        }
        TensorView flat = t.view().reshape({t.numel()});
        int64_t offset = 0;
        for (const TensorEntry* p : parts) {
            std::vector<float> values;
            TensorView src = TensorView::contiguous(const_cast<void*>(p->data), p->dtype,
                                                    Device::cpu(), {p->numel()});
            if (p->dtype == DType::F8E4M3) {
                values = dequantize_fp8(*p, scale_of(*p), cfg.fp8_block[0], cfg.fp8_block[1]);
                src = TensorView::contiguous(values.data(), DType::F32, Device::cpu(),
                                             {p->numel()});
            }
            ops::upload(ctx, src, flat.narrow(0, offset, p->numel())); // staged: values may go
            offset += p->numel();
        }
        require(offset == t.numel(), "internal: fused tensor size mismatch");
        return t;
    }
    Tensor load(const std::string& name, const Dims& shape) {
        return fuse(shape, {&take(name, shape)});
    }

    // Whether a part is (random mode: would be) a block-wise fp8 weight.
    bool is_fp8(const TensorEntry& e) const {
        return random ? cfg.fp8 && quantized_in_official_layout(e.name)
                      : e.dtype_known && e.dtype == DType::F8E4M3;
    }

    // A projection weight: resident fp8 (codes and F32 scales) when fp8 stays resident, every
    // part is fp8 and the parts' scale rows concatenate into the fused weight's (each part but
    // the last of a stack element spans whole row blocks); otherwise fuse() (dequantized).
    Weight fuse_weight(const Dims& dims, const std::vector<const TensorEntry*>& parts) {
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
        }
        require(code_at == w.w.numel() && scale_at == w.scale.numel(),
                "internal: fused fp8 weight size mismatch");
        return w;
    }
    Weight load_weight(const std::string& name, const Dims& shape) {
        return fuse_weight(shape, {&take(name, shape)});
    }

    void finish() const {
        for (const auto& [name, entry] : ckpt.entries()) {
            if (consumed.count(name)) continue;
            // Static fp8 activation scales: weights are dequantized, activations stay unscaled.
            if (cfg.fp8 && name.size() > 12 && name.compare(name.size() - 12, 12, ".input_scale") == 0)
                continue;
            fail_invalid("checkpoint has unexpected tensor '", name, "' ", entry.shape_string(),
                         " (not part of a ", cfg.model_type, " text model)");
        }
    }

    static const io::SafetensorsCheckpoint& empty_checkpoint() {
        static const io::SafetensorsCheckpoint none;
        return none;
    }

    const TensorEntry& scale_of(const TensorEntry& e) const {
        const TensorEntry* s = ckpt.find(e.name + "_scale_inv");
        if (!s) fail_invalid("fp8 tensor '", e.name, "' has no scale '", e.name, "_scale_inv'");
        return *s;
    }
    // A scale tensor as F32 values; F32, BF16 or F16 stored, every value finite.
    static std::vector<float> scale_values(const TensorEntry& s) {
        if (!s.dtype_known || !is_float(s.dtype) || s.dtype == DType::F64)
            fail(ErrorCategory::Unsupported, "fp8 scale '", s.name, "' has dtype ", s.dtype_name,
                 "; expected F32, BF16 or F16");
        std::vector<float> v(size_t(s.numel()));
        convert_to_f32(s.data, s.dtype, v.data(), s.numel());
        for (float x : v)
            if (!std::isfinite(x)) fail_invalid("fp8 scale '", s.name, "' holds a non-finite value");
        return v;
    }
    uint64_t seed_of(const std::string& name) const {
        return random_seed ^ std::hash<std::string>{}(name);
    }

    const ModelConfig& cfg;
    const io::SafetensorsCheckpoint& ckpt;
    const ops::ExecContext& ctx;
    DType dtype;
    bool keep_fp8 = false; // fp8 projections stay fp8 on the device (fuse_weight)
    bool random = false;
    uint64_t random_seed = 0;
    std::set<std::string> consumed;
    std::deque<TensorEntry> placeholders;
};

GdnWeights bind_gdn(Binder& b, const std::string& p) {
    const ModelConfig& c = b.cfg;
    const int64_t H = c.hidden_size, C = c.conv_dim(), Vd = c.value_dim(),
                  Hv = c.linear_num_value_heads, K = c.linear_conv_kernel;
    GdnWeights w;
    const TensorEntry& qkv = b.take(p + "in_proj_qkv.weight", {C, H});
    const TensorEntry& z = b.take(p + "in_proj_z.weight", {Vd, H});
    const TensorEntry& beta = b.take(p + "in_proj_b.weight", {Hv, H});
    const TensorEntry& alpha = b.take(p + "in_proj_a.weight", {Hv, H});
    // The FP8 releases quantize qkv and z but keep b and a in bf16: two weights then.
    if (b.keep_fp8 && b.is_fp8(qkv) && b.is_fp8(z) && !(b.is_fp8(beta) && b.is_fp8(alpha))) {
        w.in_proj = b.fuse_weight({C + Vd, H}, {&qkv, &z});
        w.in_proj_ba = Weight(b.fuse({2 * Hv, H}, {&beta, &alpha}));
    } else {
        w.in_proj = b.fuse_weight({C + Vd + 2 * Hv, H}, {&qkv, &z, &beta, &alpha});
    }
    w.conv = b.fuse({C, K}, {&b.take(p + "conv1d.weight", {C, 1, K})});
    w.A_log = b.load(p + "A_log", {Hv});
    w.dt_bias = b.load(p + "dt_bias", {Hv});
    w.norm = b.load(p + "norm.weight", {c.linear_value_head_dim});
    w.out_proj = b.load_weight(p + "out_proj.weight", {H, Vd});
    return w;
}

AttentionWeights bind_attention(Binder& b, const std::string& p) {
    const ModelConfig& c = b.cfg;
    const int64_t H = c.hidden_size, D = c.head_dim, nH = c.num_heads, nKV = c.num_kv_heads;
    AttentionWeights w;
    w.in_proj =
        b.fuse_weight({nH * 2 * D + 2 * nKV * D, H}, {&b.take(p + "q_proj.weight", {nH * 2 * D, H}),
                                               &b.take(p + "k_proj.weight", {nKV * D, H}),
                                               &b.take(p + "v_proj.weight", {nKV * D, H})});
    w.q_norm = b.load(p + "q_norm.weight", {D});
    w.k_norm = b.load(p + "k_norm.weight", {D});
    w.o_proj = b.load_weight(p + "o_proj.weight", {H, nH * D});
    return w;
}

void bind_experts(Binder& b, const std::string& p, MlpWeights& w) {
    const ModelConfig& c = b.cfg;
    const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
    if (b.random || b.ckpt.find(p + "gate_up_proj")) { // fused 3-D, as in real checkpoints
        w.experts_gate_up = b.load_weight(p + "gate_up_proj", {E, 2 * I, H});
        w.experts_down = b.load_weight(p + "down_proj", {E, H, I});
        return;
    }
    std::vector<const TensorEntry*> gate_up, down;
    for (int64_t e = 0; e < E; ++e) { // per expert, as HF save_pretrained writes them
        const std::string q = p + std::to_string(e) + ".";
        gate_up.push_back(&b.take(q + "gate_proj.weight", {I, H}));
        gate_up.push_back(&b.take(q + "up_proj.weight", {I, H}));
        down.push_back(&b.take(q + "down_proj.weight", {H, I}));
    }
    w.experts_gate_up = b.fuse_weight({E, 2 * I, H}, gate_up);
    w.experts_down = b.fuse_weight({E, H, I}, down);
}

MlpWeights bind_mlp(Binder& b, const std::string& p) {
    const ModelConfig& c = b.cfg;
    const int64_t H = c.hidden_size;
    MlpWeights w;
    if (!c.moe) {
        const int64_t I = c.intermediate_size;
        w.gate_up = b.fuse_weight({2 * I, H}, {&b.take(p + "gate_proj.weight", {I, H}),
                                               &b.take(p + "up_proj.weight", {I, H})});
        w.down = b.load_weight(p + "down_proj.weight", {H, I});
        return w;
    }
    const int64_t E = c.num_experts, Is = c.shared_expert_intermediate_size;
    w.router = b.fuse({E + 1, H}, {&b.take(p + "gate.weight", {E, H}),
                                   &b.take(p + "shared_expert_gate.weight", {1, H})});
    bind_experts(b, p + "experts.", w);
    w.shared_gate_up =
        b.fuse_weight({2 * Is, H}, {&b.take(p + "shared_expert.gate_proj.weight", {Is, H}),
                                    &b.take(p + "shared_expert.up_proj.weight", {Is, H})});
    w.shared_down = b.load_weight(p + "shared_expert.down_proj.weight", {H, Is});
    return w;
}

LayerWeights bind_layer(Binder& b, const std::string& p, LayerKind kind) {
    const int64_t H = b.cfg.hidden_size;
    LayerWeights w;
    w.kind = kind;
    w.input_norm = b.load(p + "input_layernorm.weight", {H});
    w.post_norm = b.load(p + "post_attention_layernorm.weight", {H});
    if (kind == LayerKind::LinearAttention)
        w.gdn = bind_gdn(b, p + "linear_attn.");
    else
        w.attn = bind_attention(b, p + "self_attn.");
    w.mlp = bind_mlp(b, p + "mlp.");
    return w;
}

MtpWeights bind_mtp(Binder& b, int64_t layers) {
    const int64_t H = b.cfg.hidden_size;
    MtpWeights w;
    if (layers == 0) return w;
    w.fc = b.load_weight("mtp.fc.weight", {H, 2 * H});
    w.pre_fc_norm_embedding = b.load("mtp.pre_fc_norm_embedding.weight", {H});
    w.pre_fc_norm_hidden = b.load("mtp.pre_fc_norm_hidden.weight", {H});
    w.norm = b.load("mtp.norm.weight", {H});
    for (int64_t l = 0; l < layers; ++l)
        w.layers.push_back(
            bind_layer(b, "mtp.layers." + std::to_string(l) + ".", LayerKind::FullAttention));
    return w;
}

VisionBlockWeights bind_vision_block(Binder& b, const std::string& p) {
    const io::VisionConfig& v = b.cfg.vision;
    const int64_t D = v.hidden_size, I = v.intermediate_size;
    VisionBlockWeights w;
    w.norm1_w = b.load(p + "norm1.weight", {D});
    w.norm1_b = b.load(p + "norm1.bias", {D});
    w.norm2_w = b.load(p + "norm2.weight", {D});
    w.norm2_b = b.load(p + "norm2.bias", {D});
    w.qkv_w = b.load(p + "attn.qkv.weight", {3 * D, D});
    w.qkv_b = b.load(p + "attn.qkv.bias", {3 * D});
    w.proj_w = b.load(p + "attn.proj.weight", {D, D});
    w.proj_b = b.load(p + "attn.proj.bias", {D});
    w.fc1_w = b.load(p + "mlp.linear_fc1.weight", {I, D});
    w.fc1_b = b.load(p + "mlp.linear_fc1.bias", {I});
    w.fc2_w = b.load(p + "mlp.linear_fc2.weight", {D, I});
    w.fc2_b = b.load(p + "mlp.linear_fc2.bias", {D});
    return w;
}

// The tower when the config has one and the checkpoint carries it (a text-only export of a
// multimodal config has no model.visual.* tensors: the model then takes no media).
VisionWeights bind_vision(Binder& b) {
    const ModelConfig& c = b.cfg;
    VisionWeights w;
    const std::string p = "model.visual.";
    if (!c.has_vision || (!b.random && !b.ckpt.find(p + "patch_embed.proj.weight"))) return w;
    const io::VisionConfig& v = c.vision;
    const int64_t D = v.hidden_size, M = D * v.merge_unit();
    w.patch_w = b.fuse({D, v.patch_values()},
                       {&b.take(p + "patch_embed.proj.weight",
                                {D, v.in_channels, v.temporal_patch_size, v.patch_size,
                                 v.patch_size})});
    w.patch_b = b.load(p + "patch_embed.proj.bias", {D});
    w.pos_embed = b.load(p + "pos_embed.weight", {v.num_position_embeddings, D});
    for (int64_t l = 0; l < v.depth; ++l)
        w.blocks.push_back(bind_vision_block(b, p + "blocks." + std::to_string(l) + "."));
    w.merger_norm_w = b.load(p + "merger.norm.weight", {D});
    w.merger_norm_b = b.load(p + "merger.norm.bias", {D});
    w.merger_fc1_w = b.load(p + "merger.linear_fc1.weight", {M, M});
    w.merger_fc1_b = b.load(p + "merger.linear_fc1.bias", {M});
    w.merger_fc2_w = b.load(p + "merger.linear_fc2.weight", {c.hidden_size, M});
    w.merger_fc2_b = b.load(p + "merger.linear_fc2.bias", {c.hidden_size});
    return w;
}

} // namespace

int64_t count_mtp_layers(const io::SafetensorsCheckpoint& ckpt) {
    int64_t layers = 0;
    const std::string prefix = "mtp.layers.";
    for (const auto& [name, entry] : ckpt.entries()) {
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string rest = name.substr(prefix.size());
        const size_t dot = rest.find('.');
        if (dot == 0 || dot == std::string::npos) continue;
        const std::string index = rest.substr(0, dot);
        if (index.find_first_not_of("0123456789") != std::string::npos || index.size() > 4)
            continue;
        layers = std::max<int64_t>(layers, std::stoll(index) + 1);
    }
    if (layers == 0 && ckpt.find("mtp.fc.weight")) layers = 1; // then the layer tensors are missing
    return layers;
}

namespace {

ModelWeights bind_all(Binder& b, int64_t mtp_layers) {
    const ModelConfig& cfg = b.cfg;
    const std::string p = cfg.text_prefix();
    const int64_t V = cfg.vocab_size, H = cfg.hidden_size;
    ModelWeights w;
    w.embed = b.load(p + "embed_tokens.weight", {V, H});
    w.final_norm = b.load(p + "norm.weight", {H});
    for (int64_t l = 0; l < cfg.num_layers; ++l)
        w.layers.push_back(
            bind_layer(b, p + "layers." + std::to_string(l) + ".", cfg.layer_types[size_t(l)]));
    if (cfg.tie_word_embeddings) {
        if (b.ckpt.find("lm_head.weight")) b.take("lm_head.weight", {V, H}); // a saved tied copy
        w.lm_head = w.embed;
    } else {
        w.lm_head = b.load("lm_head.weight", {V, H});
    }
    w.mtp = bind_mtp(b, mtp_layers);
    w.vision = bind_vision(b);
    return w;
}

} // namespace

ModelWeights load_weights(const ModelConfig& cfg, const io::SafetensorsCheckpoint& ckpt,
                          const ops::ExecContext& ctx, bool fp8_resident) {
    Binder b(cfg, ckpt, ctx, fp8_resident);
    ModelWeights w = bind_all(b, count_mtp_layers(ckpt));
    b.finish();
    return w;
}

ModelWeights random_weights(const ModelConfig& cfg, const ops::ExecContext& ctx, uint64_t seed,
                            bool fp8_resident) {
    Binder b(cfg, ctx, seed, fp8_resident);
    return bind_all(b, cfg.mtp_num_hidden_layers);
}

} // namespace ninfer::model
