// model/param_count.h: parameter counts vs the fixture tensors, KV and GDN state byte formulas.
#include <cmath>

#include "core/checked.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/param_count.h"
#include "model/weight_loader.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using io::ModelConfig;
using io::SafetensorsCheckpoint;

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0;
}
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// Element counts of a checkpoint's tensors, split the way ParamCounts splits them.
struct TensorSums {
    int64_t text = 0, mtp = 0, embedding = 0, lm_head = 0, gdn = 0, attention = 0, mlp = 0,
            norms = 0, routed_experts = 0;
};

TensorSums sum_checkpoint(const ModelConfig& c, const SafetensorsCheckpoint& ckpt) {
    TensorSums s;
    const std::string p = c.text_prefix();
    for (const auto& [name, e] : ckpt.entries()) {
        const int64_t n = e.numel();
        if (starts_with(name, "model.visual.")) continue;
        if (starts_with(name, "mtp.")) {
            s.mtp += n;
            continue;
        }
        s.text += n;
        if (name == p + "embed_tokens.weight")
            s.embedding += n;
        else if (name == "lm_head.weight")
            s.lm_head += n;
        else if (contains(name, ".linear_attn."))
            s.gdn += n;
        else if (contains(name, ".self_attn."))
            s.attention += n;
        else if (contains(name, ".mlp."))
            s.mlp += n;
        else if (contains(name, "layernorm.weight") || name == p + "norm.weight")
            s.norms += n;
        else
            ADD_FAILURE() << "unclassified tensor " << name;
        if (contains(name, ".mlp.experts.")) s.routed_experts += n;
    }
    return s;
}

TEST(ParamCount, MatchesEveryFixtureCheckpoint) {
    for (const std::string& name : fixture_names()) {
        SCOPED_TRACE(name);
        const ModelConfig c = io::load_hf_config(fixture_path(name));
        const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(fixture_path(name));
        const int64_t mtp_layers = model::count_mtp_layers(ckpt);
        const model::ParamCounts p = model::count_params(c, mtp_layers);
        const TensorSums s = sum_checkpoint(c, ckpt);
        EXPECT_EQ(p.text_total, s.text);
        EXPECT_EQ(p.mtp, s.mtp);
        EXPECT_EQ(p.embedding, s.embedding);
        EXPECT_EQ(p.lm_head, s.lm_head);
        EXPECT_EQ(p.gdn_layers, s.gdn);
        EXPECT_EQ(p.attention_layers, s.attention);
        EXPECT_EQ(p.mlp, s.mlp);
        EXPECT_EQ(p.norms, s.norms);
        // Per token: all but the routed experts not chosen, plus one embedding row and the head.
        const int64_t H = c.hidden_size;
        int64_t unused_experts = 0;
        if (c.moe)
            unused_experts =
                s.routed_experts / c.num_experts * (c.num_experts - c.num_experts_per_tok);
        EXPECT_EQ(p.active_per_token,
                  s.text - s.embedding - s.lm_head - unused_experts + H + c.vocab_size * H);
    }
}

TEST(ParamCount, MtpIsZeroWithoutMtpLayersAndScalesWithThem) {
    const ModelConfig c = io::load_hf_config(fixture_path("dense_vlm_mtp"));
    EXPECT_EQ(model::count_params(c, 0).mtp, 0);
    const int64_t one = model::count_params(c, 1).mtp, two = model::count_params(c, 2).mtp;
    const int64_t H = c.hidden_size;
    EXPECT_EQ(two - one, one - (2 * H * H + 3 * H)); // one more decoder layer
    EXPECT_EQ(model::count_params(c, 2).text_total, model::count_params(c, 0).text_total);
}

TEST(ParamCount, TiedHeadIsNotCountedTwice) {
    io::ModelConfig c = io::load_hf_config(fixture_path("dense_text_sharded"));
    ASSERT_TRUE(c.tie_word_embeddings);
    const model::ParamCounts tied = model::count_params(c, 0);
    c.tie_word_embeddings = false;
    const model::ParamCounts untied = model::count_params(c, 0);
    EXPECT_EQ(tied.lm_head, 0);
    EXPECT_EQ(untied.lm_head, c.vocab_size * c.hidden_size);
    EXPECT_EQ(untied.text_total - tied.text_total, c.vocab_size * c.hidden_size);
    EXPECT_EQ(untied.active_per_token, tied.active_per_token); // the head is read either way
}

TEST(ParamCount, DefaultMoeConfigMatchesThe35BCheckpoint) {
    // The HF MoE defaults are the 35B-A3B shapes; MODEL_QWEN3_5.md §1.3 gives the header counts
    // of its 40 blocks and of its MTP head.
    const ModelConfig c = io::parse_hf_config(json{{"model_type", "qwen3_5_moe_text"}}, "35b");
    const model::ParamCounts p = model::count_params(c, 1);
    EXPECT_EQ(p.gdn_layers + p.attention_layers + p.mlp + p.norms - c.hidden_size, 33'643'489'920);
    EXPECT_EQ(p.mtp, 844'640'768);
}

ModelConfig small_config() {
    // 4 layers (GDN, attention, GDN, attention); nKV 2, D 8; Hk 2, Hv 4, dk = dv = 4, K 4.
    return io::parse_hf_config(
        json{{"model_type", "qwen3_5_text"},
             {"vocab_size", 32},
             {"hidden_size", 16},
             {"num_hidden_layers", 4},
             {"layer_types",
              {"linear_attention", "full_attention", "linear_attention", "full_attention"}},
             {"num_attention_heads", 4},
             {"num_key_value_heads", 2},
             {"head_dim", 8},
             {"linear_num_key_heads", 2},
             {"linear_num_value_heads", 4},
             {"linear_key_head_dim", 4},
             {"linear_value_head_dim", 4},
             {"linear_conv_kernel_dim", 4},
             {"intermediate_size", 24}},
        "small");
}

TEST(ParamCount, KvBytesPerToken) {
    const ModelConfig c = small_config();
    // 2 attention layers * (K + V) * 2 kv heads * head_dim 8 = 64 elements per token.
    using ops::KvDtype;
    EXPECT_EQ(model::kv_bytes_per_token(c, KvDtype::Activation, DType::BF16), 128);
    EXPECT_EQ(model::kv_bytes_per_token(c, KvDtype::Activation, DType::F32), 256);
    // int8: a byte a dim plus one f16 scale per (token, head) row of 8 dims (one group of 64).
    EXPECT_EQ(model::kv_bytes_per_token(c, KvDtype::Int8, DType::BF16), 64 + 8 * 2);
    // fp8: a byte a dim plus one f32 scale per row.
    EXPECT_EQ(model::kv_bytes_per_token(c, KvDtype::Fp8, DType::BF16), 64 + 8 * 4);
}

TEST(ParamCount, GdnStateBytesPerSequence) {
    const ModelConfig c = small_config();
    // Per GDN layer: conv history 32 channels (2*2*4 + 4*4) * 3 steps, and an f32 recurrent
    // state of 4 heads * 4 * 4 = 64 floats (256 bytes). Two GDN layers.
    EXPECT_EQ(model::gdn_state_bytes_per_sequence(c, 2), 2 * (32 * 3 * 2 + 256));
    EXPECT_EQ(model::gdn_state_bytes_per_sequence(c, 4), 2 * (32 * 3 * 4 + 256));
    // --gdn-state-dtype bf16: the recurrent state in 2 bytes an element.
    EXPECT_EQ(model::gdn_state_bytes_per_sequence(c, 2, 2), 2 * (32 * 3 * 2 + 128));
}

TEST(ParamCount, DecodeStepBytesOfABatch) {
    // The 35B-A3B: 40 layers, 256 experts, top 8, experts of 3 x 2048 x 512 bf16 parameters.
    const ModelConfig c = io::parse_hf_config(json{{"model_type", "qwen3_5_moe_text"}}, "35b");
    const double expert = 3.0 * 2048 * 512 * 2, routed_one = 40 * 8 * expert;
    const model::DecodeStepBytes one = model::decode_step_bytes(c, 1'000'000'000'000, 2.0, 1,
                                                                10, 7, 11);
    EXPECT_DOUBLE_EQ(one.weights_every_token, 1e12 - routed_one);
    EXPECT_NEAR(one.routed_experts, routed_one, 1e-3); // one sequence: its own top-8
    EXPECT_DOUBLE_EQ(one.gdn_state, 2.0 * 11);         // read and written
    EXPECT_DOUBLE_EQ(one.kv, 10.0 * 7);
    // 64 sequences read each layer's experts that any of them routes to, under uniform routing.
    const model::DecodeStepBytes b = model::decode_step_bytes(c, 1'000'000'000'000, 2.0, 64, 10,
                                                              7, 11);
    EXPECT_NEAR(b.routed_experts, 40 * 256 * (1 - std::pow(1 - 8.0 / 256, 64)) * expert, 1e-3);
    EXPECT_DOUBLE_EQ(b.total(), b.weights_every_token + b.routed_experts + 64 * 2.0 * 11 +
                                    64 * 10.0 * 7);
    // A dense model has no routed part.
    const model::DecodeStepBytes dense =
        model::decode_step_bytes(small_config(), 1000, 2.0, 64, 0, 7, 11);
    EXPECT_EQ(dense.routed_experts, 0.0);
    EXPECT_EQ(dense.weights_every_token, 1000.0);
}

TEST(ParamCount, SmallConfigByHand) {
    const ModelConfig c = small_config();
    const model::ParamCounts p = model::count_params(c, 0);
    // GDN: qkv 32x16 + z 16x16 + b, a 4x16 each + conv 32x4 + A_log, dt_bias 4 each + norm 4
    // + out 16x16.
    EXPECT_EQ(p.gdn_layers, 2 * (512 + 256 + 128 + 128 + 8 + 4 + 256));
    // Attention: q 64x16 + k, v 16x16 each + q_norm, k_norm 8 each + o 16x32.
    EXPECT_EQ(p.attention_layers, 2 * (1024 + 512 + 16 + 512));
    EXPECT_EQ(p.mlp, 4 * 3 * 24 * 16);
    EXPECT_EQ(p.norms, 4 * 2 * 16 + 16);
    EXPECT_EQ(p.embedding, 32 * 16);
    EXPECT_EQ(p.lm_head, 32 * 16);
}

// The config reader's upper bounds keep every derived count in range: a MoE config with every
// field at its limit counts without overflow, and the checked Size arithmetic itself refuses a
// product past int64 (the guard a wrapped count would otherwise slip through).
TEST(ParamCount, LargestAllowedConfigCountsWithoutOverflow) {
    const json top = {{"model_type", "qwen3_5_moe_text"},
                      {"vocab_size", 1 << 22},
                      {"hidden_size", 1 << 16},
                      {"num_hidden_layers", 1024},
                      {"num_attention_heads", 1024},
                      {"num_key_value_heads", 1024},
                      {"head_dim", 1024},
                      {"linear_num_key_heads", 1024},
                      {"linear_num_value_heads", 1024},
                      {"linear_key_head_dim", 1024},
                      {"linear_value_head_dim", 1024},
                      {"linear_conv_kernel_dim", 64},
                      {"moe_intermediate_size", 1 << 20},
                      {"shared_expert_intermediate_size", 1 << 20},
                      {"num_experts", 4096},
                      {"num_experts_per_tok", 4096},
                      {"mtp_num_hidden_layers", 16},
                      {"max_position_embeddings", 1 << 24}};
    const ModelConfig c = io::parse_hf_config(top, "limits.json");
    model::ParamCounts p;
    ASSERT_NO_THROW(p = model::count_params(c, c.mtp_num_hidden_layers));
    EXPECT_GT(p.text_total, p.mlp);
    EXPECT_GT(p.mlp, int64_t(1) << 58);
    EXPECT_GT(model::text_weight_bytes(p, false), p.text_total);
    const int64_t kv = model::kv_bytes_per_token(c, ops::KvDtype::Activation, DType::BF16);
    EXPECT_EQ(kv, 256 * 2 * 1024 * 1024 * int64_t(2));
    EXPECT_NO_THROW(checked_mul(kv, c.max_position_embeddings, "KV bytes"));
    EXPECT_THROW(Size(int64_t(1) << 40) * Size(int64_t(1) << 30), Error);
    EXPECT_THROW(Size(INT64_MAX) + Size(1), Error);
}

} // namespace
} // namespace ninfer::test
