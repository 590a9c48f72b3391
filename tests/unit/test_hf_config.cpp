// io/hf_config.h: HF config.json parsing (fixtures, nested layout, defaults) and its errors.
#include "io/hf_config.h"

#include <cmath>
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using io::LayerKind;
using io::ModelConfig;
constexpr LayerKind L = LayerKind::LinearAttention;
constexpr LayerKind F = LayerKind::FullAttention;

json fixture_json(const std::string& name) {
    return json::parse(read_file(fixture_path(name) / "config.json"));
}

ModelConfig parse(const json& j) {
    return io::parse_hf_config(j, "test/config.json");
}

// A small valid text-only config that the error tests modify.
json small_text() {
    return {{"model_type", "qwen3_5_text"},
            {"vocab_size", 32},
            {"hidden_size", 16},
            {"num_hidden_layers", 4},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 8},
            {"linear_num_key_heads", 2},
            {"linear_num_value_heads", 4},
            {"linear_key_head_dim", 4},
            {"linear_value_head_dim", 4},
            {"intermediate_size", 24}};
}

::testing::AssertionResult rejects(const json& j, std::initializer_list<std::string_view> needles,
                                   ErrorCategory category = ErrorCategory::InvalidArgument) {
    return raises([&] { parse(j); }, needles, category);
}

TEST(HfConfig, DenseTextShardedFixture) {
    ModelConfig c = io::load_hf_config(fixture_path("dense_text_sharded"));
    EXPECT_EQ(c.model_type, "qwen3_5_text");
    EXPECT_EQ(c.text_model_type, "qwen3_5_text");
    EXPECT_FALSE(c.moe);
    EXPECT_FALSE(c.nested);
    EXPECT_FALSE(c.has_vision);
    EXPECT_EQ(c.text_prefix(), "model.");
    EXPECT_EQ(c.vocab_size, 256);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.num_layers, 4);
    EXPECT_EQ(c.layer_types, (std::vector<LayerKind>{L, L, F, L}));
    EXPECT_EQ(c.count_layers(F), 1);
    EXPECT_EQ(c.count_layers(L), 3);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
    // rope_parameters says 1.0, the top-level legacy copy 0.25: HF reads rope_parameters.
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
    EXPECT_EQ(c.rotary_dim, 32);
    EXPECT_EQ(c.linear_num_key_heads, 2);
    EXPECT_EQ(c.linear_num_value_heads, 2);
    EXPECT_EQ(c.linear_key_head_dim, 16);
    EXPECT_EQ(c.linear_value_head_dim, 16);
    EXPECT_EQ(c.linear_conv_kernel, 4);
    EXPECT_EQ(c.key_dim(), 32);
    EXPECT_EQ(c.value_dim(), 32);
    EXPECT_EQ(c.conv_dim(), 96);
    EXPECT_EQ(c.intermediate_size, 96);
    EXPECT_EQ(c.num_experts, 0);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.mtp_num_hidden_layers, 0);
    EXPECT_EQ(c.max_position_embeddings, 4096);
    EXPECT_EQ(c.dtype, "float16");
    EXPECT_TRUE(c.eos_token_ids.empty()); // null in the config
}

TEST(HfConfig, DenseVlmMtpFixture) {
    ModelConfig c = io::load_hf_config(fixture_path("dense_vlm_mtp") / "config.json");
    EXPECT_EQ(c.model_type, "qwen3_5");
    EXPECT_EQ(c.text_model_type, "qwen3_5_text");
    EXPECT_FALSE(c.moe);
    EXPECT_TRUE(c.nested);
    EXPECT_TRUE(c.has_vision);
    EXPECT_EQ(c.text_prefix(), "model.language_model.");
    EXPECT_EQ(c.num_layers, 5);
    EXPECT_EQ(c.layer_types, (std::vector<LayerKind>{L, F, L, L, F}));
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.linear_num_key_heads, 2);
    EXPECT_EQ(c.linear_num_value_heads, 6);
    EXPECT_EQ(c.conv_dim(), 2 * 32 + 96);
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
    EXPECT_EQ(c.rotary_dim, 8);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
    EXPECT_EQ(c.intermediate_size, 96);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.dtype, "bfloat16");
    EXPECT_EQ(c.max_position_embeddings, 4096);
}

TEST(HfConfig, MoeTextFusedFixture) {
    ModelConfig c = io::load_hf_config(fixture_path("moe_text_fused"));
    EXPECT_EQ(c.model_type, "qwen3_5_moe_text");
    EXPECT_EQ(c.text_model_type, "qwen3_5_moe_text");
    EXPECT_TRUE(c.moe);
    EXPECT_FALSE(c.nested);
    EXPECT_FALSE(c.has_vision);
    EXPECT_EQ(c.layer_types, (std::vector<LayerKind>{L, L, L, F}));
    EXPECT_EQ(c.num_experts, 8);
    EXPECT_EQ(c.num_experts_per_tok, 2);
    EXPECT_EQ(c.moe_intermediate_size, 32);
    EXPECT_EQ(c.shared_expert_intermediate_size, 48);
    EXPECT_EQ(c.intermediate_size, 0);
    EXPECT_EQ(c.linear_num_value_heads, 4);
    EXPECT_EQ(c.rotary_dim, 8);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.dtype, "float32");
}

TEST(HfConfig, MoeVlmPerExpertFixture) {
    ModelConfig c = io::load_hf_config(fixture_path("moe_vlm_per_expert"));
    EXPECT_EQ(c.model_type, "qwen3_5_moe");
    EXPECT_EQ(c.text_model_type, "qwen3_5_moe_text");
    EXPECT_TRUE(c.moe);
    EXPECT_TRUE(c.nested);
    EXPECT_TRUE(c.has_vision);
    EXPECT_EQ(c.layer_types, (std::vector<LayerKind>{F, L, L, F}));
    EXPECT_EQ(c.linear_num_key_heads, 1);
    EXPECT_EQ(c.linear_num_value_heads, 4);
    EXPECT_EQ(c.conv_dim(), 2 * 16 + 64);
    // rope_parameters 0.5 overrides the top-level 0.25 of text_config.
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
    EXPECT_EQ(c.rotary_dim, 16);
    EXPECT_EQ(c.num_experts, 8);
    EXPECT_EQ(c.shared_expert_intermediate_size, 48);
    EXPECT_EQ(c.dtype, "bfloat16");
}

TEST(HfConfig, LoadErrorsNameTheFile) {
    TempDir dir;
    EXPECT_TRUE(
        raises([&] { io::load_hf_config(dir.path()); }, {"config.json"}, ErrorCategory::Io));
    write_file(dir / "config.json", "{ not json");
    EXPECT_TRUE(
        raises([&] { io::load_hf_config(dir.path()); }, {(dir / "config.json").string(), "JSON"}));
    write_file(dir / "config.json", "[1]");
    EXPECT_TRUE(raises([&] { io::load_hf_config(dir.path()); }, {(dir / "config.json").string()}));
}

TEST(HfConfig, RotaryFactorInsideRopeParametersWins) {
    json j = small_text();
    j["head_dim"] = 16;
    j["partial_rotary_factor"] = 0.25;
    j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
    EXPECT_EQ(parse(j).rotary_dim, 8);
    j["rope_parameters"].erase("partial_rotary_factor"); // falls back to the top-level copy
    EXPECT_EQ(parse(j).rotary_dim, 4);
    j.erase("partial_rotary_factor"); // HF's default 0.25
    EXPECT_DOUBLE_EQ(parse(j).partial_rotary_factor, 0.25);
    j.erase("rope_parameters");
    j["partial_rotary_factor"] = 1.0;
    EXPECT_EQ(parse(j).rotary_dim, 16);
}

TEST(HfConfig, RopeThetaSources) {
    json j = small_text();
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 10000.0); // HF default_theta
    j["rope_theta"] = 5e6;
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 5e6);
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 1e6);
    // HF: rope_parameters.setdefault("rope_theta", <top-level rope_theta>).
    j["rope_parameters"].erase("rope_theta");
    EXPECT_DOUBLE_EQ(parse(j).rope_theta, 5e6);
    j["rope_theta"] = -1;
    EXPECT_TRUE(rejects(j, {"rope_theta"}));
}

// Scaled RoPE (io/rope_scaling.h). Expected values: transformers' _compute_yarn_parameters and
// get_mscale worked in float64 (Python's math) for these parameters.
TEST(HfConfig, YarnRopeScaling) {
    json j = small_text();
    j["head_dim"] = 256; // rotary dim 64 with the default partial_rotary_factor 0.25 (Qwen3.6's)
    j["max_position_embeddings"] = 262144;
    j["rope_parameters"] = {{"rope_type", "yarn"},
                            {"factor", 4.0},
                            {"original_max_position_embeddings", 262144},
                            {"rope_theta", 1e7}};
    ModelConfig c = parse(j);
    EXPECT_EQ(c.rope_type, "yarn");
    ASSERT_EQ(c.rope_inv_freq.size(), 32u);
    // Ramp between dims 14 and 22 (corr(32) = 14.24 floored, corr(1) = 21.12 ceiled).
    const std::pair<int, double> want[] = {{0, 1.0},
                                           {5, 0.08058421877614819},
                                           {10, 0.006493816315762114},
                                           {15, 0.0004742398226801046},
                                           {20, 1.8449222025000475e-05},
                                           {31, 4.137042749857954e-08}};
    for (const auto& [i, v] : want) EXPECT_NEAR(c.rope_inv_freq[size_t(i)], v, 2e-7 * v) << i;
    EXPECT_NEAR(c.rope_attention_factor, 1.138629436111989, 1e-12); // 0.1 ln 4 + 1
    EXPECT_EQ(c.position_limit, 4 * 262144); // vLLM's derived context
    // Other betas and head dims; the attention factor given explicitly.
    j["head_dim"] = 128;
    j["partial_rotary_factor"] = 1.0;
    j["max_position_embeddings"] = 4096;
    j["rope_parameters"] = {{"rope_type", "yarn"},  {"factor", 2.0},
                            {"beta_fast", 16},      {"beta_slow", 2},
                            {"rope_theta", 1e6},    {"attention_factor", 0.5},
                            {"original_max_position_embeddings", 4096}};
    c = parse(j);
    ASSERT_EQ(c.rope_inv_freq.size(), 64u);
    const std::pair<int, double> want2[] = {
        {0, 1.0}, {20, 0.011334932173388254}, {40, 8.891397050194613e-05},
        {63, 6.204688803758598e-07}};
    for (const auto& [i, v] : want2) EXPECT_NEAR(c.rope_inv_freq[size_t(i)], v, 2e-7 * v) << i;
    EXPECT_DOUBLE_EQ(c.rope_attention_factor, 0.5);
    EXPECT_EQ(c.position_limit, 8192);
    // truncate false: the ramp's ends stay fractional (14.24 .. 21.12).
    j["head_dim"] = 256;
    j["partial_rotary_factor"] = 0.25;
    j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", false},
                            {"original_max_position_embeddings", 262144}, {"rope_theta", 1e7}};
    EXPECT_NEAR(parse(j).rope_inv_freq[10], 0.006493816315762114, 2e-9);
    // mscale and mscale_all_dim: m(4, 2) / m(4, 1).
    j["rope_parameters"]["mscale"] = 2.0;
    j["rope_parameters"]["mscale_all_dim"] = 1.0;
    EXPECT_NEAR(parse(j).rope_attention_factor,
                (0.2 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1), 1e-12);
}

TEST(HfConfig, LinearRopeScalingAndRefusals) {
    json j = small_text();
    // Linear: the default frequencies divided by the factor; the legacy key "type" names it too.
    j["rope_parameters"] = {{"type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e4}};
    ModelConfig c = parse(j);
    EXPECT_EQ(c.rope_type, "linear");
    ASSERT_EQ(c.rope_inv_freq.size(), size_t(c.rotary_dim / 2));
    for (size_t i = 0; i < c.rope_inv_freq.size(); ++i)
        EXPECT_FLOAT_EQ(c.rope_inv_freq[i],
                        float(std::pow(1e4, -2.0 * double(i) / double(c.rotary_dim)) / 2.0));
    EXPECT_DOUBLE_EQ(c.rope_attention_factor, 1.0);
    EXPECT_EQ(c.position_limit, c.max_position_embeddings);
    // Default RoPE leaves the tables off.
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}};
    c = parse(j);
    EXPECT_TRUE(c.rope_inv_freq.empty());
    EXPECT_EQ(c.position_limit, c.max_position_embeddings);
    // The legacy rope_scaling dict, which HF takes over rope_parameters.
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    EXPECT_EQ(parse(j).rope_type, "yarn");
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}};
    EXPECT_TRUE(rejects(j, {"factor", "[1, 1024]"}));
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", "two"}};
    EXPECT_TRUE(rejects(j, {"factor", "number"}));
    j["rope_scaling"] = {{"rope_type", 3}};
    EXPECT_TRUE(rejects(j, {"rope_type", "string"}));
    j.erase("rope_scaling");
    // Types whose frequencies depend on the sequence length are refused, naming the type.
    json nested = fixture_json("dense_vlm_mtp");
    nested["text_config"]["rope_parameters"]["rope_type"] = "dynamic";
    EXPECT_TRUE(rejects(nested, {"dynamic", "yarn"}, ErrorCategory::Unsupported));
}

TEST(HfConfig, TieWordEmbeddingsComesFromTheTopLevelWhenNested) {
    json j = fixture_json("dense_vlm_mtp");
    j["tie_word_embeddings"] = true;
    j["text_config"]["tie_word_embeddings"] = false;
    EXPECT_TRUE(parse(j).tie_word_embeddings);
    j["tie_word_embeddings"] = false;
    j["text_config"]["tie_word_embeddings"] = true;
    EXPECT_FALSE(parse(j).tie_word_embeddings);
    j.erase("tie_word_embeddings"); // no top-level flag: the text_config one
    EXPECT_TRUE(parse(j).tie_word_embeddings);
    json flat = small_text();
    flat["tie_word_embeddings"] = true;
    EXPECT_TRUE(parse(flat).tie_word_embeddings);
    flat["tie_word_embeddings"] = "yes";
    EXPECT_TRUE(rejects(flat, {"tie_word_embeddings"}));
}

TEST(HfConfig, LayerTypesFromFullAttentionInterval) {
    json j = small_text();
    j["num_hidden_layers"] = 8;
    ModelConfig c = parse(j); // default interval 4
    EXPECT_EQ(c.layer_types, (std::vector<LayerKind>{L, L, L, F, L, L, L, F}));
    j["full_attention_interval"] = 2;
    j["num_hidden_layers"] = 6;
    EXPECT_EQ(parse(j).layer_types, (std::vector<LayerKind>{L, F, L, F, L, F}));
    j["full_attention_interval"] = 1;
    EXPECT_EQ(parse(j).count_layers(F), 6);
    j["full_attention_interval"] = 0;
    EXPECT_TRUE(rejects(j, {"full_attention_interval"}));
    j.erase("full_attention_interval");
    j["layer_types"] = nullptr; // null counts as absent
    EXPECT_EQ(parse(j).layer_types, (std::vector<LayerKind>{L, L, L, F, L, L}));
}

TEST(HfConfig, DefaultsOfTheDenseTextClass) {
    ModelConfig c = parse({{"model_type", "qwen3_5_text"}});
    EXPECT_EQ(c.vocab_size, 248320);
    EXPECT_EQ(c.hidden_size, 4096);
    EXPECT_EQ(c.num_layers, 32);
    EXPECT_EQ(c.count_layers(F), 8);
    EXPECT_EQ(c.layer_types[3], F);
    EXPECT_EQ(c.num_heads, 16);
    EXPECT_EQ(c.num_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 256);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
    EXPECT_EQ(c.rotary_dim, 64);
    EXPECT_EQ(c.linear_num_key_heads, 16);
    EXPECT_EQ(c.linear_num_value_heads, 32);
    EXPECT_EQ(c.linear_key_head_dim, 128);
    EXPECT_EQ(c.linear_value_head_dim, 128);
    EXPECT_EQ(c.linear_conv_kernel, 4);
    EXPECT_EQ(c.intermediate_size, 12288);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.mtp_num_hidden_layers, 0);
    EXPECT_EQ(c.max_position_embeddings, 32768);
    EXPECT_EQ(c.dtype, "");
    EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(HfConfig, DefaultsOfTheMoeTextClass) {
    for (const json& j : {json{{"model_type", "qwen3_5_moe_text"}},
                          json{{"model_type", "qwen3_5_moe"}, {"text_config", json::object()}}}) {
        ModelConfig c = parse(j);
        EXPECT_TRUE(c.moe);
        EXPECT_EQ(c.nested, j["model_type"] == "qwen3_5_moe");
        EXPECT_FALSE(c.has_vision);
        EXPECT_EQ(c.vocab_size, 248320);
        EXPECT_EQ(c.hidden_size, 2048);
        EXPECT_EQ(c.num_layers, 40);
        EXPECT_EQ(c.count_layers(F), 10);
        EXPECT_EQ(c.num_heads, 16);
        EXPECT_EQ(c.num_kv_heads, 2);
        EXPECT_EQ(c.head_dim, 256);
        EXPECT_EQ(c.linear_num_value_heads, 32);
        EXPECT_EQ(c.moe_intermediate_size, 512);
        EXPECT_EQ(c.shared_expert_intermediate_size, 512);
        EXPECT_EQ(c.num_experts, 256);
        EXPECT_EQ(c.num_experts_per_tok, 8);
        EXPECT_EQ(c.intermediate_size, 0);
        EXPECT_EQ(c.max_position_embeddings, 32768);
    }
}

TEST(HfConfig, UnknownModelTypeIsUnsupported) {
    for (const char* type : {"qwen3_next", "llama", "qwen3_5_vision", ""}) {
        json j = small_text();
        j["model_type"] = type;
        EXPECT_TRUE(rejects(j, {"model_type", type}, ErrorCategory::Unsupported)) << type;
    }
    json j = small_text();
    j.erase("model_type");
    EXPECT_TRUE(rejects(j, {"model_type"}, ErrorCategory::Unsupported));
    EXPECT_TRUE(rejects(json::array(), {"test/config.json"}));
}

TEST(HfConfig, NestedTypesNeedATextConfig) {
    EXPECT_TRUE(rejects({{"model_type", "qwen3_5"}}, {"text_config"}));
    EXPECT_TRUE(rejects({{"model_type", "qwen3_5_moe"}, {"text_config", 3}}, {"text_config"}));
}

TEST(HfConfig, LayerTypesMustMatchTheLayerCount) {
    json j = small_text();
    j["layer_types"] = {"linear_attention", "full_attention", "linear_attention"};
    EXPECT_TRUE(rejects(j, {"layer_types", "3", "4"}));
    j["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "full_attention",
                        "full_attention"};
    EXPECT_TRUE(rejects(j, {"layer_types"}));
}

TEST(HfConfig, LayerTypesMustBeKnown) {
    json j = small_text();
    j["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention",
                        "full_attention"};
    EXPECT_TRUE(rejects(j, {"layer_types", "sliding_attention"}));
    j["layer_types"] = {"linear_attention", 1, "linear_attention", "full_attention"};
    EXPECT_TRUE(rejects(j, {"layer_types"}));
    j["layer_types"] = "full_attention";
    EXPECT_TRUE(rejects(j, {"layer_types"}));
}

TEST(HfConfig, SizesMustBePositiveIntegers) {
    for (const char* key :
         {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
          "linear_key_head_dim", "linear_value_head_dim", "intermediate_size",
          "max_position_embeddings"}) {
        for (const json& bad : {json(-1), json(0), json(2.5), json("8")}) {
            json j = small_text();
            j[key] = bad;
            EXPECT_TRUE(rejects(j, {key, "test/config.json"})) << key << " = " << bad.dump();
        }
    }
    json moe = fixture_json("moe_text_fused");
    for (const char* key : {"moe_intermediate_size", "shared_expert_intermediate_size",
                            "num_experts", "num_experts_per_tok"}) {
        json j = moe;
        j[key] = -4;
        EXPECT_TRUE(rejects(j, {key})) << key;
    }
    json j = small_text();
    j["linear_conv_kernel_dim"] = 1;
    EXPECT_TRUE(rejects(j, {"linear_conv_kernel_dim"}));
    j = small_text();
    j["mtp_num_hidden_layers"] = -1;
    EXPECT_TRUE(rejects(j, {"mtp_num_hidden_layers"}));
    j["mtp_num_hidden_layers"] = 0;
    EXPECT_EQ(parse(j).mtp_num_hidden_layers, 0);
    j["mtp_num_hidden_layers"] = 2;
    EXPECT_EQ(parse(j).mtp_num_hidden_layers, 2);
}

// Every size field has an upper bound (a few times the largest real model), so that hostile
// values are refused by name instead of wrapping the sizes derived from them.
TEST(HfConfig, HostileSizesAreRefused) {
    const json huge[] = {json(int64_t(1) << 40), json(int64_t(1e12)),
                         json(uint64_t(18446744073709551615ull)), json(INT64_MAX)};
    for (const char* key :
         {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
          "linear_key_head_dim", "linear_value_head_dim", "intermediate_size",
          "max_position_embeddings", "linear_conv_kernel_dim", "mtp_num_hidden_layers",
          "full_attention_interval"}) {
        for (const json& bad : huge) {
            json j = small_text();
            j[key] = bad;
            EXPECT_TRUE(rejects(j, {key, "must be <="})) << key << " = " << bad.dump();
        }
    }
    json moe = fixture_json("moe_text_fused");
    for (const char* key : {"moe_intermediate_size", "shared_expert_intermediate_size",
                            "num_experts", "num_experts_per_tok"}) {
        json j = moe;
        j[key] = int64_t(1) << 40;
        EXPECT_TRUE(rejects(j, {key, "must be <="})) << key;
    }
    json j = small_text();
    j["eos_token_id"] = int64_t(1) << 33;
    EXPECT_TRUE(rejects(j, {"eos_token_id", "not a token id"}));
    j["eos_token_id"] = {2, -1};
    EXPECT_TRUE(rejects(j, {"eos_token_id", "not a token id"}));
    j = small_text();
    j["rope_theta"] = std::numeric_limits<double>::infinity(); // a json built in code can hold it
    EXPECT_TRUE(rejects(j, {"rope_theta", "finite"}));
    j = small_text();
    j["rms_norm_eps"] = -1e-6;
    EXPECT_TRUE(rejects(j, {"rms_norm_eps", "positive"}));
    json vlm = fixture_json("dense_vlm_mtp");
    for (const char* key : {"depth", "hidden_size", "num_heads", "intermediate_size",
                            "in_channels", "patch_size", "num_position_embeddings"}) {
        json v = vlm;
        v["vision_config"][key] = int64_t(1) << 40;
        EXPECT_TRUE(rejects(v, {key, "must be <="})) << "vision " << key;
    }
    json v = vlm;
    v["image_token_id"] = int64_t(1) << 32;
    EXPECT_TRUE(rejects(v, {"image_token_id", "must be <="}));
}

TEST(HfConfig, AttentionHeadsMustDivideByKvHeads) {
    json j = small_text();
    j["num_attention_heads"] = 6;
    j["num_key_value_heads"] = 4;
    EXPECT_TRUE(rejects(j, {"num_key_value_heads"}));
    j["num_key_value_heads"] = 3;
    EXPECT_NO_THROW(parse(j));
}

TEST(HfConfig, ValueHeadsMustBeAMultipleOfKeyHeads) {
    json j = small_text();
    j["linear_num_key_heads"] = 4;
    j["linear_num_value_heads"] = 6;
    EXPECT_TRUE(rejects(j, {"linear_num_value_heads"}));
    j["linear_num_value_heads"] = 2; // fewer value than key heads
    EXPECT_TRUE(rejects(j, {"linear_num_value_heads"}));
    j["linear_num_value_heads"] = 12;
    EXPECT_NO_THROW(parse(j));
}

TEST(HfConfig, RotaryDimMustBeEven) {
    json j = small_text();
    j["head_dim"] = 12; // 12 * 0.25 = 3
    EXPECT_TRUE(rejects(j, {"partial_rotary_factor", "3"}));
    j["head_dim"] = 4; // 4 * 0.25 = 1
    EXPECT_TRUE(rejects(j, {"partial_rotary_factor"}));
    for (double factor : {0.0, -0.5, 1.5}) {
        json k = small_text();
        k["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", factor}};
        EXPECT_TRUE(rejects(k, {"partial_rotary_factor"})) << factor;
    }
}

TEST(HfConfig, OtherUnsupportedSettings) {
    json j = small_text();
    j["hidden_act"] = "gelu";
    EXPECT_TRUE(rejects(j, {"gelu"}, ErrorCategory::Unsupported));
    j = small_text();
    j["attention_bias"] = true;
    EXPECT_TRUE(rejects(j, {"attention_bias"}, ErrorCategory::Unsupported));
    j = small_text();
    j["rms_norm_eps"] = 0;
    EXPECT_TRUE(rejects(j, {"rms_norm_eps"}));
    json moe = fixture_json("moe_text_fused");
    moe["num_experts_per_tok"] = 9;
    EXPECT_TRUE(rejects(moe, {"num_experts_per_tok"}));
}

TEST(HfConfig, EosTokenIdsAndDtype) {
    json j = small_text();
    j["eos_token_id"] = 7;
    EXPECT_EQ(parse(j).eos_token_ids, std::vector<int32_t>{7});
    j["eos_token_id"] = {3, 5};
    EXPECT_EQ(parse(j).eos_token_ids, (std::vector<int32_t>{3, 5}));
    json nested = fixture_json("dense_vlm_mtp"); // text_config eos is null: the top-level list
    nested["eos_token_id"] = {11, 12};
    EXPECT_EQ(parse(nested).eos_token_ids, (std::vector<int32_t>{11, 12}));
    nested["text_config"]["eos_token_id"] = 9;
    EXPECT_EQ(parse(nested).eos_token_ids, std::vector<int32_t>{9});
    j.erase("dtype");
    j["torch_dtype"] = "bfloat16";
    EXPECT_EQ(parse(j).dtype, "bfloat16");
}

// Published configs kept in the repository (configs/*.json).
TEST(HfConfig, RepositoryConfigsParse) {
    const fs::path dir = fs::path(fixtures_dir()).parent_path().parent_path() / "configs";
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".json") files.push_back(entry.path());
    ASSERT_FALSE(files.empty()) << dir << " holds no *.json";
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.string());
        ModelConfig c;
        ASSERT_NO_THROW(c = io::load_hf_config(file));
        EXPECT_EQ(int64_t(c.layer_types.size()), c.num_layers);
        EXPECT_GT(c.count_layers(F), 0);
        EXPECT_GT(c.count_layers(L), 0);
        EXPECT_EQ(c.rotary_dim % 2, 0);
        EXPECT_EQ(c.num_heads % c.num_kv_heads, 0);
        EXPECT_EQ(c.linear_num_value_heads % c.linear_num_key_heads, 0);
        EXPECT_EQ(c.moe, c.num_experts > 0);
        EXPECT_EQ(c.moe, c.intermediate_size == 0);
    }
}

} // namespace
} // namespace ninfer::test
