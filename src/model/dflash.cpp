// The DFlash / DFlash2 drafter's weights and forward (model/dflash.h), written with ops::.
#include "model/dflash.h"

#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/weight_binder.h"
#include "ops/attention.h"
#include "ops/dflash.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"

namespace ninfer::model {

using binding::Dims;

// Activation buffers for `capacity` rows, reused across calls.
struct DFlashModel::Scratch {
    int64_t capacity = 0;
    int64_t generation = 0; // reallocations so far
    Tensor x, h, proj, q, k, attn, out, gate_up, act, dyn, conv;

    void ensure(const DFlashConfig& c, Device device, DType dt, int64_t rows) {
        if (rows <= capacity) return;
        capacity = std::max<int64_t>(rows, 2 * capacity);
        ++generation;
        Allocator& a = ops::device_allocator(device);
        const int64_t T = capacity, H = c.hidden_size, D = c.head_dim;
        x = Tensor::empty(a, dt, {T, H});
        h = Tensor::empty(a, dt, {T, H});
        proj = Tensor::empty(a, dt, {T, (c.num_heads + 2 * c.num_kv_heads) * D});
        q = Tensor::empty(a, dt, {T, c.num_heads, D});
        k = Tensor::empty(a, dt, {T, c.num_kv_heads, D});
        attn = Tensor::empty(a, dt, {T, c.num_heads, D});
        out = Tensor::empty(a, dt, {T, H});
        gate_up = Tensor::empty(a, dt, {T, 2 * c.intermediate_size});
        act = Tensor::empty(a, dt, {T, c.intermediate_size});
        if (c.v2) {
            dyn = Tensor::empty(a, dt, {T, 2 * c.conv_taps * c.conv_groups()});
            conv = Tensor::empty(a, dt, {T, H});
        }
    }
};

namespace {

io::ModelConfig binder_config() {
    io::ModelConfig c;
    c.model_type = "dflash drafter";
    return c;
}

// The checkpoint's spelling of a codebook: z-lab stores the embedding matrix without ".weight".
std::string codebook_name(const io::SafetensorsCheckpoint& ckpt, const std::string& base) {
    return ckpt.find(base) || !ckpt.find(base + ".weight") ? base : base + ".weight";
}

// The prefix of the drafter's tensor names: z-lab's checkpoints name them bare ("fc.weight",
// "layers.0. ..."); trainers that save the drafter inside a wrapper module prefix every name
// (e.g. "model."). Found from the one fc.weight; none or several is an error naming them.
std::string name_prefix(const io::SafetensorsCheckpoint& ckpt, const std::string& source) {
    if (ckpt.find("fc.weight")) return "";
    std::vector<std::string> found;
    const std::string leaf = ".fc.weight";
    for (const auto& [name, entry] : ckpt.entries())
        if (name.size() > leaf.size() &&
            name.compare(name.size() - leaf.size(), leaf.size(), leaf) == 0 &&
            name.find("layers.") == std::string::npos)
            found.push_back(name.substr(0, name.size() - leaf.size() + 1));
    if (found.size() == 1) return found.front();
    if (found.empty()) fail_invalid(source, ": the drafter checkpoint has no 'fc.weight'");
    std::string list;
    for (const std::string& p : found) list += (list.empty() ? "" : ", ") + p + "fc.weight";
    fail_invalid(source, ": the drafter checkpoint has several fc.weight tensors (", list,
                 "); expected one");
}

DFlashWeights bind_drafter(binding::Binder& b, const DFlashConfig& c,
                           const io::SafetensorsCheckpoint& ckpt, const std::string& prefix) {
    const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
    const int64_t nH = c.num_heads, nKV = c.num_kv_heads;
    DFlashWeights w;
    w.fc = b.load_weight(prefix + "fc.weight", {H, int64_t(c.target_layers.size()) * H});
    w.hidden_norm = b.load(prefix + "hidden_norm.weight", {H});
    w.norm = b.load(prefix + "norm.weight", {H});
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = prefix + "layers." + std::to_string(l) + ".";
        DFlashLayerWeights& L = w.layers.emplace_back();
        L.input_norm = b.load(p + "input_layernorm.weight", {H});
        L.post_norm = b.load(p + "post_attention_layernorm.weight", {H});
        L.q_norm = b.load(p + "self_attn.q_norm.weight", {D});
        L.k_norm = b.load(p + "self_attn.k_norm.weight", {D});
        L.qkv = b.fuse_weight({(nH + 2 * nKV) * D, H},
                              {&b.take(p + "self_attn.q_proj.weight", {nH * D, H}),
                               &b.take(p + "self_attn.k_proj.weight", {nKV * D, H}),
                               &b.take(p + "self_attn.v_proj.weight", {nKV * D, H})});
        L.o_proj = b.load_weight(p + "self_attn.o_proj.weight", {H, nH * D});
        L.gate_up = b.fuse_weight({2 * I, H}, {&b.take(p + "mlp.gate_proj.weight", {I, H}),
                                               &b.take(p + "mlp.up_proj.weight", {I, H})});
        L.down = b.load_weight(p + "mlp.down_proj.weight", {H, I});
        if (c.v2) {
            const int64_t taps = c.conv_taps, G = c.conv_groups();
            L.attn_conv_base = b.load(p + "attention_conv.base_kernel", {2, taps, H});
            L.attn_conv_proj =
                b.load_weight(p + "attention_conv.kernel_projection.weight", {2 * taps * G, H});
            L.mlp_conv_base = b.load(p + "mlp_conv.base_kernel", {2, taps, H});
            L.mlp_conv_proj =
                b.load_weight(p + "mlp_conv.kernel_projection.weight", {2 * taps * G, H});
        }
    }
    if (c.v2) {
        const int64_t R = c.selector_rank, V = c.vocab_size;
        const std::string p = prefix + "candidate_selector.";
        w.selector_proj = b.load_weight(p + "hidden_projection.weight", {R, H});
        w.predecessor = b.load(codebook_name(ckpt, p + "predecessor_codebook"), {V, R});
        w.successor = b.load(codebook_name(ckpt, p + "successor_codebook"), {V, R});
    }
    return w;
}

int64_t bytes_of(const DFlashWeights& w) {
    int64_t n = w.fc.nbytes() + w.hidden_norm.view().nbytes() + w.norm.view().nbytes();
    for (const DFlashLayerWeights& l : w.layers) {
        for (const Tensor* t : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm,
                                &l.attn_conv_base, &l.mlp_conv_base})
            if (t->defined()) n += t->view().nbytes();
        for (const Weight* x :
             {&l.qkv, &l.o_proj, &l.gate_up, &l.down, &l.attn_conv_proj, &l.mlp_conv_proj})
            if (x->defined()) n += x->nbytes();
    }
    if (w.selector_proj.defined())
        n += w.selector_proj.nbytes() + w.predecessor.view().nbytes() + w.successor.view().nbytes();
    return n;
}

TensorView cols(const TensorView& v, int64_t begin, int64_t count) {
    return v.narrow(1, begin, count);
}

} // namespace

DFlashModel::DFlashModel(DFlashConfig config, DFlashWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)),
      scratch_(std::make_unique<Scratch>()) {}

DFlashModel::~DFlashModel() = default;

std::unique_ptr<DFlashModel> DFlashModel::load(const std::filesystem::path& dir,
                                               const io::ModelConfig& target,
                                               const ops::ExecContext& ctx,
                                               const TokenLookup& find_token) {
    const std::filesystem::path config_path = dir / "config.json";
    DFlashConfig c = load_dflash_config(config_path);
    resolve_dflash_target(c, target, config_path.string(), find_token);
    const io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(dir);
    const io::ModelConfig bc = binder_config();
    binding::Binder b(bc, ckpt, ctx, /*fp8_resident=*/false);
    const std::string prefix = name_prefix(ckpt, dir.string());
    DFlashWeights w = bind_drafter(b, c, ckpt, prefix);
    // Some trainers save copies of the target's embedding and head, or RoPE buffers: the
    // drafter uses the target's own, so these are read past (anything else unknown is an error).
    for (const auto& [name, entry] : ckpt.entries())
        if (name == prefix + "embed_tokens.weight" || name == "embed_tokens.weight" ||
            name == prefix + "lm_head.weight" || name == "lm_head.weight" ||
            name.find("rotary_emb.inv_freq") != std::string::npos)
            b.consumed.insert(name);
    b.finish();
    return std::unique_ptr<DFlashModel>(new DFlashModel(std::move(c), std::move(w)));
}

std::unique_ptr<DFlashModel> DFlashModel::random(DFlashConfig config, const io::ModelConfig& target,
                                                 const ops::ExecContext& ctx, uint64_t seed,
                                                 const TokenLookup& find_token) {
    resolve_dflash_target(config, target, "random drafter", find_token);
    const io::ModelConfig bc = binder_config();
    binding::Binder b(bc, ctx, seed, /*fp8_resident=*/false);
    DFlashWeights w = bind_drafter(b, config, io::SafetensorsCheckpoint(), "");
    // Plain RMSNorm weights scale by w (not 1 + w): random ones sit near 1.
    uint64_t s = seed;
    auto near_one = [&](const Tensor& t) { ops::fill_random(ctx, t, ++s, 1.0f, 0.02f); };
    for (const Tensor* t : {&w.hidden_norm, &w.norm}) near_one(*t);
    for (const DFlashLayerWeights& l : w.layers)
        for (const Tensor* t : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm}) near_one(*t);
    return std::unique_ptr<DFlashModel>(new DFlashModel(std::move(config), std::move(w)));
}

int64_t DFlashModel::weight_bytes() const {
    return bytes_of(weights_);
}

std::pair<int32_t, int32_t> DFlashModel::span_for(int64_t layer, int64_t p, int64_t last) const {
    const int64_t window = config_.sliding[size_t(layer)] ? config_.sliding_window : 0;
    const int64_t begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    int64_t end = config_.causal[size_t(layer)] ? p + 1 : last + 1;
    if (window > 0) end = std::min(end, p + window); // symmetric: tau - p < window
    return {int32_t(begin), int32_t(end)};
}

bool DFlashModel::uniform_layers() const {
    for (int64_t l = 1; l < config_.num_layers; ++l)
        if (config_.sliding[size_t(l)] != config_.sliding[0] ||
            config_.causal[size_t(l)] != config_.causal[0])
            return false;
    return true;
}

void DFlashModel::write_context(const ops::ExecContext& ctx, const TensorView& features,
                                const TensorView& positions, const ops::SeqBatch& seqs,
                                const CacheViews& caches) {
    const DFlashConfig& c = config_;
    const int64_t T = features.size(0), D = c.head_dim, nKV = c.num_kv_heads;
    const int64_t nH = c.num_heads;
    if (T == 0) return;
    require(int64_t(caches.draft_k_cache.size()) == c.num_layers,
            "DFlash: the KV pool holds no cache for the drafter's layers");
    scratch_->ensure(c, ctx.device, ctx.dtype, T);
    Scratch& s = *scratch_;
    const float eps = float(c.rms_norm_eps);
    TensorView x = s.x.view().narrow(0, 0, T);
    ops::linear(ctx, features, weights_.fc, x);
    ops::rms_norm(ctx, x, weights_.hidden_norm, eps, x, /*weight_offset=*/0.0f);
    TensorView kv = cols(s.proj.view().narrow(0, 0, T), 0, 2 * nKV * D);
    TensorView k = s.k.view().narrow(0, 0, T);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const DFlashLayerWeights& w = weights_.layers[size_t(l)];
        // The k | v rows of the layer's fused q | k | v projection.
        ops::linear(ctx, x, ops::WeightView(w.qkv.w.view().narrow(0, nH * D, 2 * nKV * D)), kv);
        ops::rms_norm(ctx, kv.split_heads(0, nKV, D), w.k_norm, eps, k, 0.0f);
        ops::rope(ctx, k, positions, D, c.rope_theta);
        ops::kv_cache_write(ctx, k, kv.split_heads(nKV * D, nKV, D), seqs,
                            caches.draft_k_cache[size_t(l)], caches.draft_v_cache[size_t(l)]);
    }
}

// One drafter layer over the block rows in s.x (in place).
void DFlashModel::layer(const ops::ExecContext& ctx, const DFlashLayerWeights& w,
                        const DFlashBlocks& b, const ops::SpanBatch& spans,
                        const TensorView& k_cache, const TensorView& v_cache, int64_t T) {
    const DFlashConfig& c = config_;
    Scratch& s = *scratch_;
    const int64_t H = c.hidden_size, D = c.head_dim, nH = c.num_heads, nKV = c.num_kv_heads;
    const int64_t tG = c.v2 ? c.conv_taps * c.conv_groups() : 0;
    const float eps = float(c.rms_norm_eps);
    TensorView x = s.x.view().narrow(0, 0, T), h = s.h.view().narrow(0, 0, T);
    TensorView out = s.out.view().narrow(0, 0, T);
    TensorView dyn = c.v2 ? s.dyn.view().narrow(0, 0, T) : TensorView();
    TensorView conv = c.v2 ? s.conv.view().narrow(0, 0, T) : TensorView();
    // GroupedDynamicCausalConv: prepare (side 0) on the input, finish (side 1) on the output,
    // both with the kernels the input projects.
    auto prepare = [&](const Weight& proj, const Tensor& base, const TensorView& in) {
        ops::linear(ctx, in, proj, dyn);
        ops::grouped_dynamic_conv(ctx, in, cols(dyn, 0, tG),
                                  base.view().narrow(0, 0, 1).reshape({c.conv_taps, H}),
                                  c.conv_group, b.host_segments, b.segments, conv);
        return conv;
    };
    auto finish = [&](const Tensor& base, const TensorView& in) {
        ops::grouped_dynamic_conv(ctx, in, cols(dyn, tG, tG),
                                  base.view().narrow(0, 1, 1).reshape({c.conv_taps, H}),
                                  c.conv_group, b.host_segments, b.segments, conv);
        return conv;
    };
    // Attention.
    ops::rms_norm(ctx, x, w.input_norm, eps, h, 0.0f);
    TensorView attn_in = c.v2 ? prepare(w.attn_conv_proj, w.attn_conv_base, h) : h;
    TensorView proj = cols(s.proj.view().narrow(0, 0, T), 0, (nH + 2 * nKV) * D);
    ops::linear(ctx, attn_in, w.qkv, proj);
    TensorView q = s.q.view().narrow(0, 0, T), k = s.k.view().narrow(0, 0, T);
    ops::rms_norm(ctx, proj.split_heads(0, nH, D), w.q_norm, eps, q, 0.0f);
    ops::rms_norm(ctx, proj.split_heads(nH * D, nKV, D), w.k_norm, eps, k, 0.0f);
    ops::rope(ctx, q, b.positions, D, c.rope_theta);
    ops::rope(ctx, k, b.positions, D, c.rope_theta);
    ops::kv_cache_write(ctx, k, proj.split_heads((nH + nKV) * D, nKV, D), b.seqs, k_cache, v_cache);
    TensorView attn = s.attn.view().narrow(0, 0, T);
    ops::span_attention(ctx, q, k_cache, v_cache, spans, float(1.0 / std::sqrt(double(D))), attn);
    if (c.v2) {
        ops::linear(ctx, attn.reshape({T, nH * D}), w.o_proj, out);
        ops::add(ctx, x, finish(w.attn_conv_base, out), x);
    } else {
        ops::linear(ctx, attn.reshape({T, nH * D}), w.o_proj, x, /*accumulate=*/true);
    }
    // MLP.
    ops::rms_norm(ctx, x, w.post_norm, eps, h, 0.0f);
    TensorView mlp_in = c.v2 ? prepare(w.mlp_conv_proj, w.mlp_conv_base, h) : h;
    TensorView gu = s.gate_up.view().narrow(0, 0, T), act = s.act.view().narrow(0, 0, T);
    ops::linear(ctx, mlp_in, w.gate_up, gu);
    ops::silu_mul(ctx, gu, act);
    if (c.v2) {
        ops::linear(ctx, act, w.down, out);
        ops::add(ctx, x, finish(w.mlp_conv_base, out), x);
    } else {
        ops::linear(ctx, act, w.down, x, /*accumulate=*/true);
    }
}

int64_t DFlashModel::scratch_generation() const { return scratch_->generation; }

void DFlashModel::propose(const ops::ExecContext& ctx, const DFlashBlocks& b,
                          const std::vector<const ops::SpanBatch*>& layer_spans,
                          const CacheViews& caches, const ModelWeights& target,
                          const TensorView& out) {
    const DFlashConfig& c = config_;
    const int64_t T = b.tokens.size(0);
    require(T > 0, "DFlash: empty proposal");
    require(int64_t(layer_spans.size()) == c.num_layers &&
                int64_t(caches.draft_k_cache.size()) == c.num_layers,
            "DFlash: spans or caches do not match the drafter's layers");
    scratch_->ensure(c, ctx.device, ctx.dtype, T);
    Scratch& s = *scratch_;
    ops::embedding(ctx, b.tokens, target.embed, s.x.view().narrow(0, 0, T));
    for (int64_t l = 0; l < c.num_layers; ++l)
        layer(ctx, weights_.layers[size_t(l)], b, *layer_spans[size_t(l)],
              caches.draft_k_cache[size_t(l)], caches.draft_v_cache[size_t(l)], T);
    ops::rms_norm(ctx, s.x.view().narrow(0, 0, T), weights_.norm, float(c.rms_norm_eps), out, 0.0f);
}

} // namespace ninfer::model
