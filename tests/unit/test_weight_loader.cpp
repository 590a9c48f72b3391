// model/weight_loader.h: fixture loading, fused layouts and shapes, expert layouts, errors.
#include <map>
#include <regex>
#include <set>

#include "model/weight_binder.h"
#include "model/weight_loader.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using io::LayerKind;
using io::ModelConfig;
using io::SafetensorsCheckpoint;
using model::ModelWeights;
using Dims = std::vector<int64_t>;

struct Loaded {
    ModelConfig cfg;
    SafetensorsCheckpoint ckpt;
    ModelWeights w;
};

Loaded load_dir(const fs::path& dir) {
    Loaded l{io::load_hf_config(dir), SafetensorsCheckpoint::open(dir), {}};
    l.w = model::load_weights(l.cfg, l.ckpt, ops::ExecContext::cpu());
    return l;
}

// The listed checkpoint tensors converted to f32 and concatenated in order.
std::vector<float> concat_f32(const SafetensorsCheckpoint& ckpt,
                              const std::vector<std::string>& names) {
    std::vector<float> out;
    for (const std::string& name : names) {
        const io::TensorEntry* e = ckpt.find(name);
        if (!e) {
            ADD_FAILURE() << "fixture lacks " << name;
            continue;
        }
        std::vector<float> v = entry_to_f32(*e);
        out.insert(out.end(), v.begin(), v.end());
    }
    return out;
}

// The views' helpers (unit_test_util.h), and the same for a model::Weight.
using test::dims_of;
using test::tensor_values;
std::vector<int64_t> dims_of(const model::Weight& w) {
    return test::dims_of(w.w.view());
}
std::vector<float> tensor_values(const model::Weight& w) {
    EXPECT_FALSE(w.is_fp8()) << "a dense load holds no fp8 weights";
    return test::tensor_values(w.w.view());
}

void expect_layer_shapes(const ModelConfig& c, const model::LayerWeights& l, LayerKind kind) {
    const int64_t H = c.hidden_size, C = c.conv_dim(), Vd = c.value_dim(),
                  Hv = c.linear_num_value_heads, D = c.head_dim, nH = c.num_heads,
                  nKV = c.num_kv_heads;
    EXPECT_EQ(l.kind, kind);
    EXPECT_EQ(dims_of(l.input_norm), Dims{H});
    EXPECT_EQ(dims_of(l.post_norm), Dims{H});
    if (kind == LayerKind::LinearAttention) {
        EXPECT_EQ(dims_of(l.gdn.in_proj), (Dims{C + Vd + 2 * Hv, H}));
        EXPECT_EQ(dims_of(l.gdn.conv), (Dims{C, c.linear_conv_kernel}));
        EXPECT_EQ(dims_of(l.gdn.A_log), Dims{Hv});
        EXPECT_EQ(dims_of(l.gdn.dt_bias), Dims{Hv});
        EXPECT_EQ(dims_of(l.gdn.norm), Dims{c.linear_value_head_dim});
        EXPECT_EQ(dims_of(l.gdn.out_proj), (Dims{H, Vd}));
        EXPECT_FALSE(l.attn.in_proj.defined());
    } else {
        EXPECT_EQ(dims_of(l.attn.in_proj), (Dims{nH * 2 * D + 2 * nKV * D, H}));
        EXPECT_EQ(dims_of(l.attn.q_norm), Dims{D});
        EXPECT_EQ(dims_of(l.attn.k_norm), Dims{D});
        EXPECT_EQ(dims_of(l.attn.o_proj), (Dims{H, nH * D}));
        EXPECT_FALSE(l.gdn.in_proj.defined());
    }
    if (c.moe) {
        const int64_t E = c.num_experts, I = c.moe_intermediate_size,
                      Is = c.shared_expert_intermediate_size;
        // E router rows, the shared-expert gate, then zero rows to a multiple of 8.
        EXPECT_EQ(dims_of(l.mlp.router), (Dims{model::router_rows(E), H}));
        EXPECT_EQ(model::router_rows(E) % 8, 0);
        EXPECT_LT(model::router_rows(E) - (E + 1), 8);
        EXPECT_EQ(dims_of(l.mlp.experts_gate_up), (Dims{E, 2 * I, H}));
        EXPECT_EQ(dims_of(l.mlp.experts_down), (Dims{E, H, I}));
        EXPECT_EQ(dims_of(l.mlp.shared_gate_up), (Dims{2 * Is, H}));
        EXPECT_EQ(dims_of(l.mlp.shared_down), (Dims{H, Is}));
        EXPECT_FALSE(l.mlp.gate_up.defined());
    } else {
        const int64_t I = c.intermediate_size;
        EXPECT_EQ(dims_of(l.mlp.gate_up), (Dims{2 * I, H}));
        EXPECT_EQ(dims_of(l.mlp.down), (Dims{H, I}));
        EXPECT_FALSE(l.mlp.router.defined());
    }
}

// Every fused tensor of a layer equals its checkpoint parts concatenated in order.
void expect_layer_contents(const Loaded& l, const model::LayerWeights& w, const std::string& p) {
    const SafetensorsCheckpoint& ck = l.ckpt;
    EXPECT_EQ(tensor_values(w.input_norm), concat_f32(ck, {p + "input_layernorm.weight"}));
    if (w.kind == LayerKind::LinearAttention) {
        const std::string a = p + "linear_attn.";
        EXPECT_EQ(tensor_values(w.gdn.in_proj),
                  concat_f32(ck, {a + "in_proj_qkv.weight", a + "in_proj_z.weight",
                                  a + "in_proj_b.weight", a + "in_proj_a.weight"}));
        EXPECT_EQ(tensor_values(w.gdn.conv), concat_f32(ck, {a + "conv1d.weight"}));
        EXPECT_EQ(tensor_values(w.gdn.A_log), concat_f32(ck, {a + "A_log"}));
        EXPECT_EQ(tensor_values(w.gdn.out_proj), concat_f32(ck, {a + "out_proj.weight"}));
    } else {
        const std::string a = p + "self_attn.";
        EXPECT_EQ(tensor_values(w.attn.in_proj),
                  concat_f32(ck, {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}));
        EXPECT_EQ(tensor_values(w.attn.o_proj), concat_f32(ck, {a + "o_proj.weight"}));
    }
    const std::string m = p + "mlp.";
    if (l.cfg.moe) {
        std::vector<float> router =
            concat_f32(ck, {m + "gate.weight", m + "shared_expert_gate.weight"});
        router.resize(size_t(w.mlp.router.numel()), 0.0f); // the padding rows are zeros
        EXPECT_EQ(tensor_values(w.mlp.router), router);
        EXPECT_EQ(tensor_values(w.mlp.shared_gate_up),
                  concat_f32(ck, {m + "shared_expert.gate_proj.weight",
                                  m + "shared_expert.up_proj.weight"}));
    } else {
        EXPECT_EQ(tensor_values(w.mlp.gate_up),
                  concat_f32(ck, {m + "gate_proj.weight", m + "up_proj.weight"}));
        EXPECT_EQ(tensor_values(w.mlp.down), concat_f32(ck, {m + "down_proj.weight"}));
    }
}

// The expert tensors as the checkpoint holds them: fused 3-D, or per expert (gate then up).
std::pair<std::vector<float>, std::vector<float>> checkpoint_experts(const Loaded& l,
                                                                     const std::string& p) {
    if (l.ckpt.find(p + "gate_up_proj"))
        return {concat_f32(l.ckpt, {p + "gate_up_proj"}), concat_f32(l.ckpt, {p + "down_proj"})};
    std::vector<std::string> gate_up, down;
    for (int64_t e = 0; e < l.cfg.num_experts; ++e) {
        const std::string q = p + std::to_string(e) + ".";
        gate_up.push_back(q + "gate_proj.weight");
        gate_up.push_back(q + "up_proj.weight");
        down.push_back(q + "down_proj.weight");
    }
    return {concat_f32(l.ckpt, gate_up), concat_f32(l.ckpt, down)};
}

void expect_loaded(const Loaded& l, int64_t mtp_layers) {
    const ModelConfig& c = l.cfg;
    const ModelWeights& w = l.w;
    const int64_t V = c.vocab_size, H = c.hidden_size;
    EXPECT_EQ(dims_of(w.embed), (Dims{V, H}));
    EXPECT_EQ(dims_of(w.final_norm), Dims{H});
    EXPECT_EQ(dims_of(w.lm_head), (Dims{V, H}));
    EXPECT_EQ(w.embed.view().dtype, DType::F32); // the CPU compute dtype
    EXPECT_EQ(tensor_values(w.embed),
              concat_f32(l.ckpt, {c.text_prefix() + "embed_tokens.weight"}));
    if (c.tie_word_embeddings) {
        EXPECT_EQ(w.lm_head.view().data, w.embed.view().data);
    } else {
        EXPECT_EQ(tensor_values(w.lm_head), concat_f32(l.ckpt, {"lm_head.weight"}));
    }
    ASSERT_EQ(int64_t(w.layers.size()), c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) {
        SCOPED_TRACE("layer " + std::to_string(i));
        const std::string p = c.text_prefix() + "layers." + std::to_string(i) + ".";
        expect_layer_shapes(c, w.layers[size_t(i)], c.layer_types[size_t(i)]);
        expect_layer_contents(l, w.layers[size_t(i)], p);
        if (c.moe) {
            auto [gate_up, down] = checkpoint_experts(l, p + "mlp.experts.");
            EXPECT_EQ(tensor_values(w.layers[size_t(i)].mlp.experts_gate_up), gate_up);
            EXPECT_EQ(tensor_values(w.layers[size_t(i)].mlp.experts_down), down);
        }
    }
    EXPECT_EQ(model::count_mtp_layers(l.ckpt), mtp_layers);
    ASSERT_EQ(int64_t(w.mtp.layers.size()), mtp_layers);
    if (mtp_layers == 0) {
        EXPECT_FALSE(w.mtp.fc.defined());
        return;
    }
    EXPECT_EQ(dims_of(w.mtp.fc), (Dims{H, 2 * H}));
    EXPECT_EQ(dims_of(w.mtp.pre_fc_norm_embedding), Dims{H});
    EXPECT_EQ(dims_of(w.mtp.pre_fc_norm_hidden), Dims{H});
    EXPECT_EQ(dims_of(w.mtp.norm), Dims{H});
    EXPECT_EQ(tensor_values(w.mtp.fc), concat_f32(l.ckpt, {"mtp.fc.weight"}));
    for (int64_t i = 0; i < mtp_layers; ++i) {
        SCOPED_TRACE("mtp layer " + std::to_string(i));
        const std::string p = "mtp.layers." + std::to_string(i) + ".";
        expect_layer_shapes(c, w.mtp.layers[size_t(i)], LayerKind::FullAttention);
        expect_layer_contents(l, w.mtp.layers[size_t(i)], p);
        if (c.moe) {
            auto [gate_up, down] = checkpoint_experts(l, p + "mlp.experts.");
            EXPECT_EQ(tensor_values(w.mtp.layers[size_t(i)].mlp.experts_gate_up), gate_up);
        }
    }
}

TEST(WeightLoader, DenseTextSharded) {
    expect_loaded(load_dir(fixture_path("dense_text_sharded")), 0);
}
TEST(WeightLoader, DenseVlmWithMtp) {
    expect_loaded(load_dir(fixture_path("dense_vlm_mtp")), 1);
}
TEST(WeightLoader, MoeTextFusedExperts) {
    expect_loaded(load_dir(fixture_path("moe_text_fused")), 0);
}
TEST(WeightLoader, MoeVlmPerExpertWithMtp) {
    expect_loaded(load_dir(fixture_path("moe_vlm_per_expert")), 1);
}

TEST(WeightLoader, GdnInProjRowsOnAFixture) {
    // dense_vlm_mtp: conv_dim 2*2*16 + 6*16 = 160, value_dim 96, Hv 6: 160 + 96 + 12 rows.
    Loaded l = load_dir(fixture_path("dense_vlm_mtp"));
    EXPECT_EQ(l.w.layers[0].gdn.in_proj.size(0), 268);
    EXPECT_EQ(l.w.layers[1].attn.in_proj.size(0), 4 * 2 * 32 + 2 * 2 * 32);
}

// Per-expert tensors of every "<p>experts.<e>.{gate,up,down}_proj.weight" folded into fused
// "<p>experts.gate_up_proj" [E, 2I, H] and "<p>experts.down_proj" [E, H, I], raw bytes.
std::vector<StTensor> fuse_experts(std::vector<StTensor> tensors, int64_t E) {
    const std::regex per_expert(R"((.*\.experts\.)(\d+)\.(gate|up|down)_proj\.weight)");
    std::map<std::string, std::map<std::string, StTensor>> groups; // prefix -> "e.kind" -> tensor
    std::vector<StTensor> out;
    for (StTensor& t : tensors) {
        std::smatch m;
        if (std::regex_match(t.name, m, per_expert))
            groups[m[1].str()][m[2].str() + "." + m[3].str()] = std::move(t);
        else
            out.push_back(std::move(t));
    }
    for (auto& [prefix, parts] : groups) {
        const StTensor& g0 = parts.at("0.gate");
        const StTensor& d0 = parts.at("0.down");
        StTensor gate_up{prefix + "gate_up_proj", g0.dtype, {E, 2 * g0.shape[0], g0.shape[1]}, ""};
        StTensor down{prefix + "down_proj", d0.dtype, {E, d0.shape[0], d0.shape[1]}, ""};
        for (int64_t e = 0; e < E; ++e) {
            const std::string k = std::to_string(e) + ".";
            gate_up.bytes += parts.at(k + "gate").bytes + parts.at(k + "up").bytes;
            down.bytes += parts.at(k + "down").bytes;
        }
        out.push_back(std::move(gate_up));
        out.push_back(std::move(down));
    }
    return out;
}

// The inverse: fused expert tensors split into per-expert ones.
std::vector<StTensor> split_experts(std::vector<StTensor> tensors) {
    const std::regex fused(R"((.*\.experts\.)(gate_up|down)_proj)");
    std::vector<StTensor> out;
    for (StTensor& t : tensors) {
        std::smatch m;
        if (!std::regex_match(t.name, m, fused)) {
            out.push_back(std::move(t));
            continue;
        }
        const int64_t E = t.shape[0], rows = t.shape[1], cols = t.shape[2];
        const size_t expert_bytes = t.bytes.size() / size_t(E);
        for (int64_t e = 0; e < E; ++e) {
            const std::string q = m[1].str() + std::to_string(e) + ".";
            const std::string bytes = t.bytes.substr(size_t(e) * expert_bytes, expert_bytes);
            if (m[2] == "down") {
                out.push_back({q + "down_proj.weight", t.dtype, {rows, cols}, bytes});
            } else {
                const size_t half = expert_bytes / 2;
                out.push_back(
                    {q + "gate_proj.weight", t.dtype, {rows / 2, cols}, bytes.substr(0, half)});
                out.push_back(
                    {q + "up_proj.weight", t.dtype, {rows / 2, cols}, bytes.substr(half)});
            }
        }
    }
    return out;
}

void expect_same_experts(const ModelWeights& a, const ModelWeights& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
        EXPECT_EQ(tensor_values(a.layers[i].mlp.experts_gate_up),
                  tensor_values(b.layers[i].mlp.experts_gate_up))
            << "layer " << i;
        EXPECT_EQ(tensor_values(a.layers[i].mlp.experts_down),
                  tensor_values(b.layers[i].mlp.experts_down))
            << "layer " << i;
    }
    ASSERT_EQ(a.mtp.layers.size(), b.mtp.layers.size());
    for (size_t i = 0; i < a.mtp.layers.size(); ++i)
        EXPECT_EQ(tensor_values(a.mtp.layers[i].mlp.experts_gate_up),
                  tensor_values(b.mtp.layers[i].mlp.experts_gate_up))
            << "mtp layer " << i;
}

TEST(WeightLoader, PerExpertCheckpointFusedByHandLoadsTheSame) {
    Loaded per_expert = load_dir(fixture_path("moe_vlm_per_expert"));
    TempDir dir;
    auto fused = fuse_experts(read_tensors(per_expert.ckpt), per_expert.cfg.num_experts);
    ASSERT_NE(find_tensor(fused, "mtp.layers.0.mlp.experts.gate_up_proj"), nullptr);
    write_fixture_copy("moe_vlm_per_expert", dir.path(), fused);
    Loaded l = load_dir(dir.path());
    expect_same_experts(per_expert.w, l.w);
}

TEST(WeightLoader, FusedCheckpointSplitByHandLoadsTheSame) {
    Loaded fused = load_dir(fixture_path("moe_text_fused"));
    TempDir dir;
    auto split = split_experts(read_tensors(fused.ckpt));
    ASSERT_NE(find_tensor(split, "model.layers.0.mlp.experts.7.up_proj.weight"), nullptr);
    write_fixture_copy("moe_text_fused", dir.path(), split);
    Loaded l = load_dir(dir.path());
    expect_same_experts(fused.w, l.w);
}

TEST(WeightLoader, SwappedExpertsAreNoticed) {
    // The comparison above can fail: exchanging two experts changes the loaded tensor.
    Loaded base = load_dir(fixture_path("moe_text_fused"));
    auto split = split_experts(read_tensors(base.ckpt));
    std::swap(find_tensor(split, "model.layers.0.mlp.experts.1.gate_proj.weight")->bytes,
              find_tensor(split, "model.layers.0.mlp.experts.2.gate_proj.weight")->bytes);
    TempDir dir;
    write_fixture_copy("moe_text_fused", dir.path(), split);
    Loaded l = load_dir(dir.path());
    EXPECT_NE(tensor_values(l.w.layers[0].mlp.experts_gate_up),
              tensor_values(base.w.layers[0].mlp.experts_gate_up));
    EXPECT_EQ(tensor_values(l.w.layers[1].mlp.experts_gate_up),
              tensor_values(base.w.layers[1].mlp.experts_gate_up));
}

// ---- bad checkpoints --------------------------------------------------------------------------

struct Copy {
    TempDir dir;
    std::vector<StTensor> tensors;
    explicit Copy(const std::string& fixture) : name(fixture) {
        tensors = read_tensors(SafetensorsCheckpoint::open(fixture_path(fixture)));
    }
    void write() { write_fixture_copy(name, dir.path(), tensors); }
    std::string name;
};

::testing::AssertionResult load_fails(Copy& c, std::initializer_list<std::string_view> needles,
                                      ErrorCategory category = ErrorCategory::InvalidArgument) {
    c.write();
    return raises([&] { load_dir(c.dir.path()); }, needles, category);
}

TEST(WeightLoaderErrors, UnchangedCopyLoads) {
    for (const std::string& name : fixture_names()) {
        Copy c(name);
        c.write();
        EXPECT_NO_THROW(load_dir(c.dir.path())) << name;
    }
}

TEST(WeightLoaderErrors, MissingTensor) {
    for (const char* name :
         {"model.language_model.layers.1.self_attn.k_proj.weight",
          "model.language_model.layers.0.linear_attn.A_log", "model.language_model.norm.weight",
          "lm_head.weight", "mtp.layers.0.mlp.up_proj.weight", "mtp.pre_fc_norm_hidden.weight"}) {
        Copy c("dense_vlm_mtp");
        take_tensor(c.tensors, name);
        EXPECT_TRUE(load_fails(c, {name, "missing"})) << name;
    }
    Copy per_expert("moe_vlm_per_expert");
    const char* expert = "model.language_model.layers.2.mlp.experts.5.up_proj.weight";
    take_tensor(per_expert.tensors, expert);
    EXPECT_TRUE(load_fails(per_expert, {expert}));
    Copy fused("moe_text_fused");
    take_tensor(fused.tensors, "model.layers.3.mlp.experts.down_proj");
    EXPECT_TRUE(load_fails(fused, {"model.layers.3.mlp.experts.down_proj"}));
}

TEST(WeightLoaderErrors, UnexpectedTensor) {
    Copy c("dense_vlm_mtp");
    c.tensors.push_back({"model.language_model.layers.0.mlp.extra.weight", "BF16", {2}, "abcd"});
    EXPECT_TRUE(load_fails(c, {"model.language_model.layers.0.mlp.extra.weight", "unexpected"}));
    Copy beyond("moe_text_fused");
    beyond.tensors.push_back({"model.layers.4.input_layernorm.weight", "F32", {1}, "abcd"});
    EXPECT_TRUE(load_fails(beyond, {"model.layers.4.input_layernorm.weight"}));
    // Per-expert tensors beside fused ones are not silently ignored.
    Copy mixed("moe_text_fused");
    mixed.tensors.push_back({"model.layers.0.mlp.experts.0.gate_proj.weight", "F32", {1}, "abcd"});
    EXPECT_TRUE(load_fails(mixed, {"model.layers.0.mlp.experts.0.gate_proj.weight"}));
    // Flat names in a nested checkpoint are not text weights.
    Copy flat("dense_vlm_mtp");
    flat.tensors.push_back({"model.norm.weight", "BF16", {2}, "abcd"});
    EXPECT_TRUE(load_fails(flat, {"model.norm.weight"}));
}

TEST(WeightLoaderErrors, WrongShape) {
    Copy c("dense_vlm_mtp");
    StTensor* z =
        find_tensor(c.tensors, "model.language_model.layers.0.linear_attn.in_proj_z.weight");
    ASSERT_NE(z, nullptr);
    z->shape = {64, 96}; // transposed, same bytes
    EXPECT_TRUE(load_fails(
        c, {"model.language_model.layers.0.linear_attn.in_proj_z.weight", "[64, 96]", "[96, 64]"}));
    Copy conv("moe_text_fused");
    find_tensor(conv.tensors, "model.layers.1.linear_attn.conv1d.weight")->shape = {128, 4};
    EXPECT_TRUE(load_fails(conv, {"model.layers.1.linear_attn.conv1d.weight"}));
    Copy experts("moe_text_fused");
    find_tensor(experts.tensors, "model.layers.2.mlp.experts.gate_up_proj")->shape = {16, 32, 64};
    EXPECT_TRUE(load_fails(experts, {"model.layers.2.mlp.experts.gate_up_proj"}));
}

TEST(WeightLoaderErrors, NonFloatDtype) {
    Copy c("moe_text_fused"); // F32: an I32 tensor of the same shape has the same byte count
    find_tensor(c.tensors, "model.norm.weight")->dtype = "I32";
    EXPECT_TRUE(load_fails(c, {"model.norm.weight", "I32"}, ErrorCategory::Unsupported));
    Copy bf("dense_vlm_mtp");
    StTensor* t = find_tensor(bf.tensors, "model.language_model.layers.0.linear_attn.dt_bias");
    t->dtype = "U8"; // U8 [6]: the right shape, an integer dtype
    t->bytes.resize(6);
    EXPECT_TRUE(load_fails(bf, {"model.language_model.layers.0.linear_attn.dt_bias", "U8"},
                           ErrorCategory::Unsupported));
    // F8_E4M3 loads only as a block-wise fp8 checkpoint (test_fp8_checkpoint.cpp): without an
    // fp8 quantization_config it is refused, naming the tensor and what is missing.
    Copy fp8("dense_vlm_mtp");
    StTensor* q = find_tensor(fp8.tensors, "model.language_model.layers.1.self_attn.q_proj.weight");
    q->dtype = "F8_E4M3";
    q->bytes.resize(q->bytes.size() / 2);
    EXPECT_TRUE(load_fails(fp8,
                           {"model.language_model.layers.1.self_attn.q_proj.weight", "F8_E4M3",
                            "quantization_config"},
                           ErrorCategory::InvalidArgument));
}

TEST(WeightLoader, VisualTensorsAreTheTower) {
    Copy c("dense_vlm_mtp");
    c.write();
    Loaded l = load_dir(c.dir.path());
    EXPECT_EQ(l.w.layers.size(), 5u);
    ASSERT_TRUE(l.w.vision.loaded());
    EXPECT_EQ(int64_t(l.w.vision.blocks.size()), l.cfg.vision.depth);
    // An unknown tensor under model.visual. is an error like any other.
    Copy extra("dense_vlm_mtp");
    extra.tensors.push_back({"model.visual.blocks.0.extra.weight", "F32", {1}, std::string(4, '\0')});
    EXPECT_TRUE(load_fails(extra, {"model.visual.blocks.0.extra.weight", "unexpected"}));
    // A checkpoint without the tower (a text-only export of a multimodal config) loads without it.
    Copy text("dense_vlm_mtp");
    std::erase_if(text.tensors, [](const StTensor& t) { return t.name.rfind("model.visual.", 0) == 0; });
    text.write();
    EXPECT_FALSE(load_dir(text.dir.path()).w.vision.loaded());
    // A partial tower names what is missing.
    Copy partial("dense_vlm_mtp");
    std::erase_if(partial.tensors, [](const StTensor& t) { return t.name == "model.visual.merger.norm.bias"; });
    EXPECT_TRUE(load_fails(partial, {"model.visual.merger.norm.bias", "missing"}));
}

TEST(WeightLoader, TiedCheckpointMaySaveTheHead) {
    Copy c("dense_text_sharded");
    StTensor head = *find_tensor(c.tensors, "model.embed_tokens.weight");
    head.name = "lm_head.weight";
    c.tensors.push_back(head);
    c.write();
    Loaded l = load_dir(c.dir.path());
    EXPECT_EQ(l.w.lm_head.view().data, l.w.embed.view().data);
    find_tensor(c.tensors, "lm_head.weight")->shape = {128, 128};
    EXPECT_TRUE(load_fails(c, {"lm_head.weight"}));
}

TEST(WeightLoader, CountMtpLayers) {
    auto count = [](std::vector<std::string> names) {
        TempDir dir;
        std::vector<StTensor> tensors;
        for (const std::string& n : names) tensors.push_back({n, "F32", {1}, "abcd"});
        write_safetensors(dir / "m.safetensors", tensors);
        return model::count_mtp_layers(SafetensorsCheckpoint::open(dir / "m.safetensors"));
    };
    EXPECT_EQ(count({"model.norm.weight"}), 0);
    EXPECT_EQ(count({"mtp.layers.0.a", "mtp.layers.2.b"}), 3);
    EXPECT_EQ(count({"mtp.fc.weight"}), 1); // then its layer tensors are reported missing
    EXPECT_EQ(count({"mtp.layers.x.a", "mtp.layers..b", "mtp.layers.3"}), 0);
    Copy c("dense_vlm_mtp");
    std::vector<StTensor> kept;
    for (StTensor& t : c.tensors)
        if (t.name.rfind("mtp.layers.", 0) != 0) kept.push_back(std::move(t));
    c.tensors = std::move(kept);
    EXPECT_TRUE(load_fails(c, {"mtp.layers.0."}));
}

// The meter reports at start, after each `step` bytes more than its last report, and the total
// once at finish; done never passes the total.
TEST(LoadProgressMeter, ReportsEveryStepAndOnceAtTheEnd) {
    std::vector<std::pair<int64_t, int64_t>> got;
    model::binding::ProgressMeter m(
        [&](int64_t done, int64_t total) { got.emplace_back(done, total); }, 1000, 300);
    m.start();
    for (int64_t bytes : {100, 250, 100, 200, 900}) m.add(bytes); // the last overshoots
    m.finish();
    const std::vector<std::pair<int64_t, int64_t>> want = {
        {0, 1000}, {350, 1000}, {650, 1000}, {1000, 1000}};
    EXPECT_EQ(got, want);
    model::binding::ProgressMeter silent; // no callback: nothing to call
    silent.start();
    silent.add(5);
    silent.finish();
}

// With a step of one byte the loader reports after every part it uploads: each report adds the
// checkpoint bytes of one tensor (with its scale when fp8), and the last is the checkpoint total.
TEST(WeightLoader, ReportsTheCheckpointBytesOfEveryTensorRead) {
    const fs::path quant = fs::path(fixtures_dir()) / ".." / "fixtures_quant";
    std::vector<std::pair<fs::path, bool>> loads; // directory, fp8_resident
    for (const std::string& name : fixture_names()) loads.emplace_back(fixture_path(name), false);
    for (const char* name : {"dense_fp8_sharded", "moe_fp8"})
        for (bool resident : {false, true}) loads.emplace_back(quant / name, resident);
    for (const auto& [dir, resident] : loads) {
        SCOPED_TRACE(dir.filename().string() + (resident ? " (fp8 resident)" : ""));
        const ModelConfig cfg = io::load_hf_config(dir);
        const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir);
        int64_t total = 0;
        std::set<int64_t> part_bytes; // what reading one tensor may add
        for (const auto& [name, e] : ckpt.entries()) {
            total += e.nbytes;
            const io::TensorEntry* scale = ckpt.find(name + "_scale_inv");
            part_bytes.insert(e.nbytes + (e.dtype == DType::F8E4M3 && scale ? scale->nbytes : 0));
        }
        std::vector<int64_t> done;
        model::load_weights(
            cfg, ckpt, ops::ExecContext::cpu(), resident,
            [&](int64_t d, int64_t t) {
                EXPECT_EQ(t, total);
                done.push_back(d);
            },
            /*progress_step=*/1);
        ASSERT_GT(done.size(), ckpt.entries().size() / 2); // a report per tensor, not two in all
        EXPECT_EQ(done.front(), 0);
        EXPECT_EQ(done.back(), total);
        // The last step also holds what no upload reads (a tied model's saved lm_head copy).
        for (size_t i = 1; i + 1 < done.size(); ++i)
            EXPECT_TRUE(part_bytes.count(done[i] - done[i - 1]))
                << "report " << i << " added " << done[i] - done[i - 1] << " bytes";
        EXPECT_LT(done[done.size() - 2], total);
    }
}

} // namespace
} // namespace ninfer::test
