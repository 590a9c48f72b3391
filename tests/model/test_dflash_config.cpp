// What a DFlash config.json may leave out, as z-lab's DFlashDraftModel and SGLang read it: the
// taps (dflash_config.target_layer_ids absent: derived from the target's depth by
// build_target_layer_ids), block_size at the top level, num_target_layers checked against the
// target, the mask token by its text (dflash_config.mask_token) rather than its id. The demo
// drafter written that way drafts exactly as shipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_files.h"
#include "model/dflash.h"
#include "model/dflash_acceptance.h"
#include "model/dflash_fixture.h"

namespace ninfer::test {
namespace {

using Taps = std::vector<int32_t>;

TEST(DFlashConfig, DefaultTapsFollowZLabsSpread) {
    EXPECT_EQ(model::default_target_layers(8, 3), (Taps{1, 3, 5}));   // the demo drafter's taps
    EXPECT_EQ(model::default_target_layers(7, 3), (Taps{1, 2, 4}));   // 2.5 rounds to even
    EXPECT_EQ(model::default_target_layers(11, 5), (Taps{1, 3, 4, 6, 8})); // 4.5 to even too
    EXPECT_EQ(model::default_target_layers(40, 6), (Taps{1, 8, 15, 23, 30, 37}));
    EXPECT_EQ(model::default_target_layers(64, 5), (Taps{1, 16, 31, 46, 61}));
    EXPECT_EQ(model::default_target_layers(10, 1), (Taps{5}));
}

io::ModelConfig small_target() {
    io::ModelConfig t;
    t.hidden_size = 64;
    t.vocab_size = 256;
    t.num_layers = 8;
    return t;
}

TEST(DFlashConfig, TapsAndBlockSizeMayComeFromTheTopLevelOrTheTarget) {
    const io::ModelConfig target = small_target();
    DrafterShape shape;
    shape.layers = 3;
    nlohmann::json cfg = drafter_config(target, shape);
    cfg["dflash_config"].erase("target_layer_ids");
    cfg["dflash_config"].erase("block_size");
    model::DFlashConfig c = model::parse_dflash_config(cfg, "test");
    EXPECT_TRUE(c.target_layers.empty());
    EXPECT_EQ(c.block_size, 16);
    model::resolve_dflash_target(c, target, "test");
    EXPECT_EQ(c.target_layers, (Taps{1, 3, 5}));
    cfg["block_size"] = 8; // z-lab keeps it at the top level
    EXPECT_EQ(model::parse_dflash_config(cfg, "test").block_size, 8);
    cfg["dflash_config"]["block_size"] = 10; // dflash_config's wins
    EXPECT_EQ(model::parse_dflash_config(cfg, "test").block_size, 10);
    cfg["num_target_layers"] = 8;
    c = model::parse_dflash_config(cfg, "test");
    model::resolve_dflash_target(c, target, "test");
    EXPECT_EQ(c.target_layers, (Taps{1, 3, 5}));
    cfg["num_target_layers"] = 40;
    c = model::parse_dflash_config(cfg, "test");
    try {
        model::resolve_dflash_target(c, target, "test");
        ADD_FAILURE() << "a drafter trained on 40 target layers was accepted for 8";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("num_target_layers 40 does not match the target's 8"),
                  std::string::npos)
            << e.what();
    }
    cfg["dflash_config"]["target_layer_ids"] = nlohmann::json::array();
    EXPECT_THROW(model::parse_dflash_config(cfg, "test"), Error); // given, but empty
}

TEST(DFlashConfig, FindsATokenIdByItsText) {
    const std::string demo = load_mtp_eval().model_dir;
    EXPECT_EQ(io::find_token_id(demo, "<tts_pad>"), std::optional<int32_t>(8187)); // an added token
    EXPECT_EQ(io::find_token_id(demo, "<|no such token|>"), std::nullopt);
    EXPECT_EQ(io::find_token_id(std::filesystem::temp_directory_path() / "ninfer_no_model_here",
                                "<tts_pad>"),
              std::nullopt);
}

// The shipped demo drafter (taps 1, 3, 5 of 8 layers, block 8 in dflash_config, mask id 8187)
// rewritten the other ways drafters are published: no target_layer_ids, num_target_layers and
// block_size at the top level, the mask token by its text. The derived taps and id are the
// same, so every round drafts the same: equal acceptance. Without an id or a text the target's
// tokenizer knows, the engine does not start.
TEST(DFlashConfig, DemoDrafterWithDerivedTapsDraftsTheSame) {
    MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0) << "models/ninfer-demo/dflash2/eval.json is missing";
    if (prompts.prompts.size() > 6) prompts.prompts.resize(6);
    const auto shipped = std::filesystem::path(prompts.model_dir) / "dflash2";
    const auto dir = scratch_path("ninfer_demo_dflash2_derived_taps");
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(shipped / "model.safetensors", dir / "model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(shipped / "config.json"));
    ASSERT_EQ(cfg["dflash_config"]["target_layer_ids"], nlohmann::json({1, 3, 5}));
    cfg["block_size"] = cfg["dflash_config"]["block_size"];
    cfg["dflash_config"].erase("block_size");
    cfg["dflash_config"].erase("target_layer_ids");
    cfg["num_target_layers"] = 8;
    ASSERT_EQ(cfg["dflash_config"]["mask_token_id"], 8187);
    cfg["dflash_config"].erase("mask_token_id");
    cfg["dflash_config"]["mask_token"] = "<tts_pad>";
    std::ofstream(dir / "config.json") << cfg.dump(1);
    auto accepted = [&](const std::string& drafter) {
        EngineOptions o;
        o.draft_model = drafter;
        const SpeculativeStats s = measure_dflash_acceptance(o, prompts, want);
        return std::make_pair(s.rounds, s.accepted);
    };
    const auto as_shipped = accepted(shipped.string()), derived = accepted(dir.string());
    EXPECT_GT(as_shipped.second, 0);
    EXPECT_EQ(derived, as_shipped);

    cfg["dflash_config"].erase("mask_token"); // SGLang's default text, which the demo lacks
    std::ofstream(dir / "config.json") << cfg.dump(1);
    EngineOptions o;
    o.model_dir = prompts.model_dir;
    o.speculative = "dflash2";
    o.draft_model = dir.string();
    try {
        Engine e(o);
        ADD_FAILURE() << "a drafter without a resolvable mask token started";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("mask_token_id is missing and the target's "
                                               "tokenizer has no token \"<|MASK|>\""),
                  std::string::npos)
            << err.what();
    }
}

} // namespace
} // namespace ninfer::test
