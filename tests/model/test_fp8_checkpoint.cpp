// Official-layout FP8 checkpoints (block-wise float8_e4m3fn weights with weight_scale_inv, per
// expert 2-D experts, scales in BF16 or F32 and in another shard than their weights; fixtures
// from tools/reference/make_fp8_fixture.py): ninfer loads them and runs exactly the model whose
// weights are fp8 * scale (the fixture's dequantized/ twin, F32), token for token and logprob for
// logprob on the CPU. The e4m3 decoding is checked bit pattern by bit pattern, and a checkpoint
// whose config does not match its tensors is a clear error.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/fixture_util.h"
#include "model/fp8.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

TEST(Fp8, E4m3DecodesEveryKindOfBitPattern) {
    EXPECT_EQ(model::fp8_e4m3_to_float(0x00), 0.0f);
    EXPECT_TRUE(std::signbit(model::fp8_e4m3_to_float(0x80)));
    EXPECT_EQ(model::fp8_e4m3_to_float(0x38), 1.0f);        // exponent 7 = bias
    EXPECT_EQ(model::fp8_e4m3_to_float(0x3c), 1.5f);        // mantissa 4/8
    EXPECT_EQ(model::fp8_e4m3_to_float(0x7e), 448.0f);      // the largest finite
    EXPECT_EQ(model::fp8_e4m3_to_float(0xfe), -448.0f);
    EXPECT_EQ(model::fp8_e4m3_to_float(0x08), 0.015625f);   // smallest normal 2^-6
    EXPECT_EQ(model::fp8_e4m3_to_float(0x01), 0.001953125f); // smallest subnormal 2^-9
    EXPECT_EQ(model::fp8_e4m3_to_float(0x07), 7 * 0.001953125f);
    EXPECT_TRUE(std::isnan(model::fp8_e4m3_to_float(0x7f))); // no infinities: S.1111.111 is NaN
    EXPECT_TRUE(std::isnan(model::fp8_e4m3_to_float(0xff)));
    EXPECT_EQ(model::fp8_e4m3_to_float(0x77), 240.0f);       // exponent 14, mantissa 7/8
}

// A tensor big enough to be split over threads, with partial edge blocks both ways: every value
// is fp8 * its block's scale.
TEST(Fp8, DequantizesBigTensorsBlockByBlock) {
    const int64_t rows = 2100, cols = 1100, b0 = 128, b1 = 128;
    const int64_t sr = (rows + b0 - 1) / b0, sc = (cols + b1 - 1) / b1;
    std::vector<uint8_t> q(size_t(rows * cols));
    for (size_t i = 0; i < q.size(); ++i) { // every finite pattern below 251; 0x7f is NaN
        q[i] = uint8_t((i * 131) % 251);
        if (q[i] == 0x7f) q[i] = 0x7e;
    }
    std::vector<float> scales(size_t(sr * sc));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.001f * float(i + 1);
    io::TensorEntry w, s;
    w.name = "w.weight";
    w.dtype_name = "F8_E4M3";
    w.shape = {rows, cols};
    w.data = q.data();
    w.nbytes = rows * cols;
    s.name = "w.weight_scale_inv";
    s.dtype_name = "F32";
    s.shape = {sr, sc};
    s.data = scales.data();
    s.nbytes = sr * sc * 4;
    const std::vector<float> out = model::dequantize_fp8(w, s, b0, b1);
    for (int64_t i = 0; i < rows; i += 7)
        for (int64_t j = 0; j < cols; j += 13)
            ASSERT_EQ(out[size_t(i * cols + j)],
                      model::fp8_e4m3_to_float(q[size_t(i * cols + j)]) *
                          scales[size_t((i / b0) * sc + j / b1)])
                << i << ", " << j;
    s.shape = {sr, sc + 1};
    EXPECT_THROW(model::dequantize_fp8(w, s, b0, b1), Error); // a scale of the wrong shape
}

class Fp8Checkpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8Checkpoint, RunsExactlyTheDequantizedModel) {
    const std::string dir = quant_fixture_dir(GetParam());
    ASSERT_TRUE(fs::exists(fs::path(dir) / "config.json")) << dir;
    EngineOptions o;
    o.model_dir = dir;
    Engine fp8(o);
    o.model_dir = dir + "/dequantized";
    Engine ref(o);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % 200);
    const auto got = generate(fp8, greedy_request(prompt, 16));
    const auto want = generate(ref, greedy_request(prompt, 16));
    ASSERT_EQ(ids_of(got), ids_of(want));
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].logprob, want[i].logprob) << "step " << i;
        ASSERT_EQ(got[i].top_logprobs.size(), want[i].top_logprobs.size());
        for (size_t k = 0; k < got[i].top_logprobs.size(); ++k)
            EXPECT_EQ(got[i].top_logprobs[k].logprob, want[i].top_logprobs[k].logprob);
    }
    // Sabotage arm: the quantized model differs from the unquantized one, so equality above is
    // not trivially true of any two runs.
    o.model_dir = (fs::path(fixtures_dir()) /
                   (GetParam() == "moe_fp8" ? "moe_vlm_per_expert" : "dense_vlm_mtp"))
                      .string();
    Engine original(o);
    const auto orig = generate(original, greedy_request(prompt, 16));
    double differs = 0;
    for (size_t i = 0; i < std::min(orig.size(), want.size()); ++i)
        differs = std::max(differs, double(std::fabs(orig[i].logprob - want[i].logprob)));
    EXPECT_GT(differs, 0.0) << "fp8 rounding changed nothing: the fixture is not quantized";
}

// The oracle: HF transformers (float64) on the dequantized weights, greedy ids identical
// and logprobs (the chosen token's and the top-5) within 1e-3 on the CPU.
TEST_P(Fp8Checkpoint, MatchesHfOnTheDequantizedWeights) {
    const std::string dir = quant_fixture_dir(GetParam());
    std::ifstream in(fs::path(dir) / "reference.json");
    ASSERT_TRUE(in) << "no reference.json in " << dir;
    const nlohmann::json ref = nlohmann::json::parse(in);
    ASSERT_EQ(ref.at("cases").size(), 2u);
    EngineOptions o;
    o.model_dir = dir;
    Engine fp8(o);
    constexpr double kTol = 1e-3;
    for (const auto& c : ref.at("cases")) {
        const auto prompt = c.at("prompt").get<std::vector<int32_t>>();
        const auto steps = c.at("steps");
        const auto got = generate(fp8, greedy_request(prompt, int(steps.size())));
        ASSERT_EQ(ids_of(got), c.at("greedy").get<std::vector<int32_t>>());
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_NEAR(got[i].logprob, steps[i].at("logprob").get<double>(), kTol) << i;
            const auto top = steps[i].at("top");
            ASSERT_EQ(got[i].top_logprobs.size(), top.size());
            for (size_t k = 0; k < top.size(); ++k) {
                EXPECT_EQ(got[i].top_logprobs[k].id, top[k][0].get<int32_t>()) << i << "/" << k;
                EXPECT_NEAR(got[i].top_logprobs[k].logprob, top[k][1].get<double>(), kTol);
            }
        }
    }
}

// fp8_weights "resident": the projections stay fp8 codes with F32 scales (the CPU dequantizes
// them inside each op), which must run the same model as dequantizing at load: the GDN b|a
// rows apart from the fp8 qkv|z rows, the dense fallback of a projection whose parts do not
// span whole scale blocks, and the ops' fp8 dispatch.
TEST_P(Fp8Checkpoint, ResidentFp8RunsTheDequantizedModel) {
    EngineOptions o;
    o.model_dir = quant_fixture_dir(GetParam());
    Engine dequantized(o);
    o.fp8_weights = "resident";
    Engine resident(o);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 29 + 5) % 200);
    const auto got = generate(resident, greedy_request(prompt, 16));
    const auto want = generate(dequantized, greedy_request(prompt, 16));
    ASSERT_EQ(ids_of(got), ids_of(want));
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i].logprob, want[i].logprob, kLogprobScheduleAbs) << "step " << i;
}

// Which projections a resident load keeps as fp8: all-fp8 groups whose parts span whole row
// blocks; b|a (bf16 in the official layout) apart; the router and norms dense.
TEST(Fp8Checkpoint, ResidentLoadKeepsTheFp8Projections) {
    const std::string dir = quant_fixture_dir("moe_fp8");
    const auto model = model::Qwen35Model::load(dir, ops::ExecContext::cpu(), true);
    const model::ModelWeights& w = model->weights();
    int fp8_experts = 0, split_gdn = 0;
    for (const model::LayerWeights& l : w.layers) {
        fp8_experts += l.mlp.experts_gate_up.is_fp8() && l.mlp.experts_down.is_fp8();
        EXPECT_FALSE(l.mlp.shared_gate_up.is_fp8()) << "48 gate rows do not span 32-row blocks";
        EXPECT_TRUE(l.mlp.shared_down.is_fp8());
        if (l.kind == model::LayerKind::LinearAttention) {
            split_gdn += l.gdn.in_proj.is_fp8() && l.gdn.in_proj_ba.defined() &&
                         !l.gdn.in_proj_ba.is_fp8();
            EXPECT_TRUE(l.gdn.out_proj.is_fp8());
        } else {
            EXPECT_TRUE(l.attn.in_proj.is_fp8() && l.attn.o_proj.is_fp8());
        }
    }
    EXPECT_EQ(fp8_experts, int(w.layers.size()));
    EXPECT_GT(split_gdn, 0);
    const auto plain = model::Qwen35Model::load(dir, ops::ExecContext::cpu(), false);
    for (const model::LayerWeights& l : plain->weights().layers) {
        EXPECT_FALSE(l.mlp.experts_gate_up.is_fp8());
        EXPECT_FALSE(l.gdn.in_proj_ba.defined());
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8Checkpoint,
                         ::testing::Values(std::string("moe_fp8"), std::string("dense_fp8_sharded")));

// A copy of a fixture whose config.json is edited by `edit`.
std::string edited_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path src = quant_fixture_dir(name);
    const fs::path dst = fs::temp_directory_path() / ("ninfer_fp8_" + name + "_" +
                                                      std::to_string(std::rand()));
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
        if (e.is_regular_file()) fs::copy_file(e.path(), dst / e.path().filename());
    std::ifstream in(dst / "config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    in.close();
    edit(c);
    std::ofstream(dst / "config.json") << c.dump();
    return dst.string();
}

void expect_load_error(const std::string& dir, const std::string& needle) {
    EngineOptions o;
    o.model_dir = dir;
    try {
        Engine e(o);
        FAIL() << "loaded " << dir;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}

TEST(Fp8Checkpoint, MismatchedConfigsAreClearErrors) {
    expect_load_error(edited_copy("moe_fp8", [](nlohmann::json& c) { c.erase("quantization_config"); }),
                      "no fp8 quantization_config");
    expect_load_error(edited_copy("moe_fp8",
                                  [](nlohmann::json& c) {
                                      c["quantization_config"]["weight_block_size"] = {16, 16};
                                  }),
                      "expected [");
    expect_load_error(edited_copy("moe_fp8",
                                  [](nlohmann::json& c) {
                                      c["quantization_config"]["quant_method"] = "awq";
                                  }),
                      "quant_method 'awq' is not supported");
}

} // namespace
} // namespace ninfer::test
