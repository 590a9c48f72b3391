// End to end on the committed HF fixtures: greedy ids identical to HF transformers and top-5
// log-probabilities within kLogprobVsHfAbs, on the CPU fast path and the CPU reference path.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/fixture_util.h"

namespace ninfer::test {
namespace {

void check_against_hf(const Fixture& f, const EngineOptions& options) {
    Engine engine(options);
    for (const ReferenceCase& c : f.cases) {
        const std::string where = f.name + " prompt " + std::to_string(c.prompt.size());
        auto tokens = generate(engine, greedy_request(c.prompt, int(c.steps.size())));
        ASSERT_EQ(tokens.size(), c.steps.size()) << where;
        for (size_t i = 0; i < tokens.size(); ++i) {
            const std::string at = where + " step " + std::to_string(i);
            ASSERT_EQ(tokens[i].id, c.steps[i].id) << at;
            EXPECT_NEAR(tokens[i].logprob, c.steps[i].logprob, kLogprobVsHfAbs) << at;
            expect_top_logprobs_match(tokens[i], c.steps[i], at);
        }
    }
}

// The largest |logprob - HF's| over every case's steps (infinity once an id differs).
double worst_logprob_error(const Fixture& f, const EngineOptions& options) {
    Engine engine(options);
    double worst = 0;
    for (const ReferenceCase& c : f.cases) {
        auto tokens = generate(engine, greedy_request(c.prompt, int(c.steps.size())));
        for (size_t i = 0; i < tokens.size() && i < c.steps.size(); ++i) {
            if (tokens[i].id != c.steps[i].id) return INFINITY;
            worst = std::max(worst, std::fabs(tokens[i].logprob - c.steps[i].logprob));
        }
    }
    return worst;
}

// The fixture copied with its rope parameters' rope_type linear and the given factor.
std::string with_linear_rope(const Fixture& f, double factor) {
    const auto dir = scratch_path("ninfer_rope_" + f.name + "_" + std::to_string(int(factor)));
    std::filesystem::remove_all(dir);
    std::filesystem::copy(f.dir, dir, std::filesystem::copy_options::recursive);
    std::ifstream in(dir / "config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    nlohmann::json& text = j.contains("text_config") ? j["text_config"] : j;
    text["rope_parameters"]["rope_type"] = "linear";
    text["rope_parameters"]["factor"] = factor;
    std::ofstream(dir / "config.json") << j.dump();
    return dir.string();
}

class HfParity : public ::testing::TestWithParam<Fixture> {};

// A scaled RoPE (linear, YaRN: io/rope_scaling.h) runs the composed path: per-position cos/sin
// tables gathered by each batch's positions (rope_angles.h), and mRoPE's tables from the config's
// frequencies. At factor 1 its angles are default RoPE's, so every default-RoPE fixture still
// matches HF, on the fast and the reference path; factor 2 must not (the gate's other arm). The
// YaRN fixture (dense_text_yarn) checks real scaling against HF in the parity tests above.
TEST(HfParityScaledRope, FactorOneMatchesHf) {
    int checked = 0;
    for (const Fixture& f : load_fixtures()) {
        if (io::load_hf_config(f.dir).rope_type != "default") continue; // its own reference
        EngineOptions o;
        o.model_dir = with_linear_rope(f, 1.0);
        check_against_hf(f, o);
        o.cpu_reference = true;
        check_against_hf(f, o);
        o.model_dir = with_linear_rope(f, 2.0);
        EXPECT_GT(worst_logprob_error(f, o), 10 * kLogprobVsHfAbs) << f.name;
        ++checked;
    }
    EXPECT_GE(checked, 4);
}

TEST_P(HfParity, FastPathMatchesHf) {
    EngineOptions o;
    o.model_dir = GetParam().dir;
    check_against_hf(GetParam(), o);
}

TEST_P(HfParity, ReferencePathMatchesHf) {
    EngineOptions o;
    o.model_dir = GetParam().dir;
    o.cpu_reference = true;
    check_against_hf(GetParam(), o);
}

TEST(HfFixtures, CoverTheRequiredVariety) {
    // DESIGN.md §3: both model types, both expert layouts, GDN prompts > 64 tokens, v/k head
    // ratios 1, 2 and 4, partial rotary 0.25, 0.5 and 1.0, attention as the first layer; and
    // YaRN RoPE scaling.
    std::set<std::string> types;
    std::set<int64_t> ratios;
    std::set<double> rotary;
    bool fused = false, per_expert = false, attention_first = false, long_prompt = false;
    bool yarn = false; // a scaled RoPE whose long prompt runs past its original positions
    for (const auto& f : load_fixtures()) {
        const io::ModelConfig c = io::load_hf_config(f.dir);
        types.insert(c.model_type);
        ratios.insert(c.linear_num_value_heads / c.linear_num_key_heads);
        rotary.insert(c.partial_rotary_factor);
        attention_first |= c.layer_types[0] == io::LayerKind::FullAttention;
        yarn |= c.rope_type == "yarn";
        const auto ckpt = io::SafetensorsCheckpoint::open(f.dir);
        for (const auto& [name, e] : ckpt.entries()) {
            fused |= name.find("mlp.experts.gate_up_proj") != std::string::npos;
            per_expert |= name.find("mlp.experts.0.gate_proj") != std::string::npos;
        }
        for (const auto& c2 : f.cases)
            long_prompt |= c2.prompt.size() > 64 && c2.prompt.size() % 64 != 0;
    }
    for (const char* t : {"qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"})
        EXPECT_TRUE(types.count(t)) << t;
    for (int64_t r : {1, 2, 4}) EXPECT_TRUE(ratios.count(r)) << "ratio " << r;
    for (double f : {0.25, 0.5, 1.0}) EXPECT_TRUE(rotary.count(f)) << "rotary " << f;
    EXPECT_TRUE(fused);
    EXPECT_TRUE(per_expert);
    EXPECT_TRUE(attention_first);
    EXPECT_TRUE(long_prompt);
    EXPECT_TRUE(yarn);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
