#include "model/weight_loader.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "model/weight_binder.h"

namespace ninfer::model {
namespace {

using binding::Binder;
using io::LayerKind;
using io::ModelConfig;
using io::TensorEntry;
using Dims = std::vector<int64_t>;

GdnWeights bind_gdn(Binder& b, const std::string& p) {
    const ModelConfig& c = b.cfg;
    const int64_t H = c.hidden_size, C = c.conv_dim(), Vd = c.value_dim(),
                  Hv = c.linear_num_value_heads, K = c.linear_conv_kernel;
    GdnWeights w;
    const TensorEntry& qkv = b.take(p + "in_proj_qkv.weight", {C, H});
    const TensorEntry& z = b.take(p + "in_proj_z.weight", {Vd, H});
    const TensorEntry& beta = b.take(p + "in_proj_b.weight", {Hv, H});
    const TensorEntry& alpha = b.take(p + "in_proj_a.weight", {Hv, H});
    // The FP8 releases (and ninfer convert) quantize qkv and z but keep b and a in bf16: two
    // weights then.
    if (b.stays_quantized(qkv) && b.stays_quantized(z) &&
        !(b.stays_quantized(beta) && b.stays_quantized(alpha))) {
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
    const int64_t H = c.hidden_size, E = c.held_experts(), I = c.moe_intermediate_size;
    // A checkpoint is bound whole and cut per rank afterwards (model/tensor_parallel.h).
    require(b.random || E == c.num_experts, "binding ", E, " of ", c.num_experts,
            " experts from a checkpoint: bind them all, then cut");
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
    w.router = b.fuse(
        {router_rows(E), H},
        {&b.take(p + "gate.weight", {E, H}), &b.take(p + "shared_expert_gate.weight", {1, H})},
        /*zero_tail=*/true);
    bind_experts(b, p + "experts.", w);
    w.shared_gate_up =
        b.fuse_weight({2 * Is, H}, {&b.take(p + "shared_expert.gate_proj.weight", {Is, H}),
                                    &b.take(p + "shared_expert.up_proj.weight", {Is, H})});
    w.shared_down = b.load_weight(p + "shared_expert.down_proj.weight", {H, Is});
    return w;
}

// mlp_ctx (may be null): where the post-attention norm and the MLP go (MlpPlacement).
LayerWeights bind_layer(Binder& b, const std::string& p, LayerKind kind,
                        const ops::ExecContext* mlp_ctx = nullptr) {
    const int64_t H = b.cfg.hidden_size;
    LayerWeights w;
    w.kind = kind;
    w.input_norm = b.load(p + "input_layernorm.weight", {H});
    if (kind == LayerKind::LinearAttention)
        w.gdn = bind_gdn(b, p + "linear_attn.");
    else
        w.attn = bind_attention(b, p + "self_attn.");
    const ops::ExecContext home = b.ctx;
    if (mlp_ctx) b.use(*mlp_ctx);
    w.post_norm = b.load(p + "post_attention_layernorm.weight", {H});
    w.mlp = bind_mlp(b, p + "mlp.");
    if (mlp_ctx) b.use(home);
    return w;
}

MtpWeights bind_mtp(Binder& b, int64_t layers, const LayerHook& on_layer) {
    const int64_t H = b.cfg.hidden_size;
    MtpWeights w;
    if (layers == 0) return w;
    w.fc = b.load_weight("mtp.fc.weight", {H, 2 * H});
    w.pre_fc_norm_embedding = b.load("mtp.pre_fc_norm_embedding.weight", {H});
    w.pre_fc_norm_hidden = b.load("mtp.pre_fc_norm_hidden.weight", {H});
    w.norm = b.load("mtp.norm.weight", {H});
    for (int64_t l = 0; l < layers; ++l) {
        LayerWeights layer =
            bind_layer(b, "mtp.layers." + std::to_string(l) + ".", LayerKind::FullAttention);
        w.layers.push_back(on_layer ? on_layer(std::move(layer), l, true) : std::move(layer));
    }
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

ModelWeights bind_all(Binder& b, int64_t mtp_layers, const MlpPlacement& placement,
                      const LayerHook& on_layer) {
    const ModelConfig& cfg = b.cfg;
    const std::string p = cfg.text_prefix();
    const int64_t V = cfg.vocab_size, H = cfg.hidden_size;
    ModelWeights w;
    w.embed = b.load(p + "embed_tokens.weight", {V, H});
    w.final_norm = b.load(p + "norm.weight", {H});
    require(placement.empty() || int64_t(placement.layer_device.size()) == cfg.num_layers,
            "MlpPlacement: ", placement.layer_device.size(), " layers placed for ", cfg.num_layers);
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
        LayerWeights layer = bind_layer(b, p + "layers." + std::to_string(l) + ".",
                                        cfg.layer_types[size_t(l)], placement.of(l));
        w.layers.push_back(on_layer ? on_layer(std::move(layer), l, false) : std::move(layer));
    }
    if (cfg.tie_word_embeddings) {
        if (b.ckpt.find("lm_head.weight")) b.take("lm_head.weight", {V, H}); // a saved tied copy
        w.lm_head = w.embed;
    } else {
        w.lm_head = b.load("lm_head.weight", {V, H});
    }
    w.mtp = bind_mtp(b, mtp_layers, on_layer);
    w.vision = bind_vision(b);
    return w;
}

} // namespace

ModelWeights load_weights(const ModelConfig& cfg, const io::SafetensorsCheckpoint& ckpt,
                          const ops::ExecContext& ctx, Residency resident,
                          const LoadProgress& progress, int64_t progress_step,
                          const MlpPlacement& placement, const LayerHook& on_layer) {
    Binder b(cfg, ckpt, ctx, resident.fp8, progress, progress_step);
    b.keep_grouped = resident.grouped && cfg.group_bits != 0;
    ModelWeights w = bind_all(b, count_mtp_layers(ckpt), placement, on_layer);
    b.finish();
    return w;
}

ModelWeights random_weights(const ModelConfig& cfg, const ops::ExecContext& ctx, uint64_t seed,
                            Residency resident, const MlpPlacement& placement) {
    Binder b(cfg, ctx, seed, resident.fp8);
    b.keep_grouped = resident.grouped && cfg.group_bits != 0;
    return bind_all(b, cfg.mtp_num_hidden_layers, placement, {});
}

} // namespace ninfer::model
