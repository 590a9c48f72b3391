// Speculative decoding with DFlash and DFlash2 drafters on the CPU: random drafters in z-lab's
// layout (dflash_fixture.h) on every fixture. Greedy output equals plain decoding for K = 1, 3,
// 7, 15 and auto, alone, batched, from the prefix cache and stopping inside drafted blocks
// (logprobs compared on the reference ops); a drafter that does not fit its target, or a broken
// drafter directory, is a clear error at startup.
#include <cstdlib>
#include <filesystem>
#include <map>

#include "io/safetensors_writer.h"
#include "model/dflash.h"
#include "model/dflash_fixture.h"
#include "model/sampling_gate.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

EngineOptions reference() {
    EngineOptions o;
    o.cpu_reference = true;
    return o;
}

std::filesystem::path drafter_dir(const Fixture& f, bool v2) {
    const auto dir = scratch_path("ninfer_dflash_" + f.name + (v2 ? "_v2" : "_v1"));
    DrafterShape shape;
    shape.v2 = v2;
    write_random_drafter(dir, io::load_hf_config(f.dir), shape);
    return dir;
}

Speculation dflash(const Fixture& f, bool v2) {
    Speculation s;
    s.method = v2 ? "dflash2" : "dflash";
    s.draft_model = drafter_dir(f, v2).string();
    s.alone_ks = {1, 3, 7, 15, 0};
    s.stop_k = 7;
    return s;
}

struct Case {
    Fixture fixture;
    bool v2;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.fixture.name << (c.v2 ? " dflash2" : " dflash");
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const Fixture& f : load_fixtures())
        for (bool v2 : {false, true}) out.push_back({f, v2});
    return out;
}

class DFlashExactness : public ::testing::TestWithParam<Case> {};

TEST_P(DFlashExactness, GreedyAloneEqualsPlainDecodingFastTokens) {
    const Case& c = GetParam();
    check_mtp_greedy_alone(EngineOptions{}, c.fixture, kIdsOnly, dflash(c.fixture, c.v2));
}

TEST_P(DFlashExactness, BatchedAndCachedEqualPlainDecodingReference) {
    const Case& c = GetParam();
    const Speculation s = dflash(c.fixture, c.v2);
    check_mtp_batched_and_cached(reference(), c.fixture, 7, {kLogprobScheduleAbs, 0}, s);
    check_mtp_batched_and_cached(reference(), c.fixture, 2, {kLogprobScheduleAbs, 0}, s);
}

TEST_P(DFlashExactness, StopsInsideDraftedBlocks) {
    const Case& c = GetParam();
    check_mtp_stops_inside_blocks(EngineOptions{}, c.fixture, dflash(c.fixture, c.v2));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DFlashExactness, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) {
                             const Case& c = param_info.param;
                             return c.fixture.name + (c.v2 ? "_dflash2" : "_dflash");
                         });

// Sampled requests keep their output distribution with either drafter (one-hot proposals:
// verifier.h's rule), and a wrong acceptance rule (NINFER_SPEC_SABOTAGE=accept_drafts) fails the
// same chi-square gate.
TEST(DFlashSampling, KeepsTheOutputDistributionAndCatchesAWrongAcceptanceRule) {
    const Fixture f = load_fixtures().front();
    EngineOptions o;
    o.model_dir = f.dir;
    o.prefix_cache = false;
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 24), 24);
    constexpr int kSamples = 1200;
    const auto plain = sample_triples(o, prompt, 1, kSamples);
    for (bool v2 : {false, true}) {
        const EngineOptions spec_options = with_spec(o, dflash(f, v2), 3);
        int64_t rounds = 0;
        const auto spec = sample_triples(spec_options, prompt, 1000001, kSamples, &rounds);
        EXPECT_GE(rounds, kSamples) << "the drafter did not draft";
        const double p = homogeneity_p_value(plain, spec);
        EXPECT_GT(p, 1e-4) << spec_options.speculative << " changed the output distribution (p = "
                           << p << ")";
        setenv("NINFER_SPEC_SABOTAGE", "accept_drafts", 1);
        const auto broken = sample_triples(spec_options, prompt, 2000001, kSamples);
        unsetenv("NINFER_SPEC_SABOTAGE");
        const double p_broken = homogeneity_p_value(plain, broken);
        EXPECT_LT(p_broken, 1e-4) << "the gate did not catch a wrong acceptance rule under "
                                  << spec_options.speculative << " (p = " << p_broken << ")";
    }
}

// Starting an engine with options must fail with a message that contains `want`.
void expect_start_error(const EngineOptions& o, const std::string& want) {
    try {
        Engine e(o);
        FAIL() << "the engine started; expected an error containing '" << want << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
}

TEST(DFlashErrors, DrafterThatDoesNotFitItsTargetIsAClearError) {
    const Fixture f = load_fixtures().front();
    io::ModelConfig target = io::load_hf_config(f.dir);
    EngineOptions o;
    o.model_dir = f.dir;
    o.speculative = "dflash";
    const auto base = scratch_path("ninfer_dflash_errors");
    auto write_with = [&](const std::string& name, auto&& edit) {
        const auto dir = base / name;
        write_random_drafter(dir, target, DrafterShape{});
        nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir / "config.json"));
        edit(cfg);
        std::ofstream(dir / "config.json") << cfg.dump();
        return dir.string();
    };
    o.draft_model = write_with("vocab", [](nlohmann::json& c) { c["vocab_size"] = 1000; });
    expect_start_error(o, "vocab_size");
    o.draft_model = write_with("taps", [&](nlohmann::json& c) {
        c["dflash_config"]["target_layer_ids"] = {0, target.num_layers - 1};
    });
    expect_start_error(o, "target layer");
    o.draft_model = write_with("mask", [&](nlohmann::json& c) {
        c["dflash_config"]["mask_token_id"] = target.vocab_size;
    });
    expect_start_error(o, "mask_token_id");
    o.draft_model = write_with("not_dflash", [](nlohmann::json& c) { c.erase("dflash_config"); });
    expect_start_error(o, "dflash_config");
    // The hidden size decides fc's shape: a drafter for another target is named by its tensor.
    target.hidden_size *= 2;
    {
        const auto dir = base / "hidden";
        write_random_drafter(dir, target, DrafterShape{});
        o.draft_model = dir.string();
        expect_start_error(o, "hidden_size");
    }
    // A DFlash2 drafter under --spec dflash, a missing directory, and no drafter at all.
    o.draft_model = drafter_dir(f, true).string();
    expect_start_error(o, "holds a dflash2 drafter");
    o.draft_model = (base / "missing").string();
    expect_start_error(o, "cannot read");
    o.draft_model.clear();
    expect_start_error(o, "needs --draft-model");
    o.speculative = "mtp";
    o.draft_model = drafter_dir(f, false).string();
    expect_start_error(o, "--draft-model needs --spec dflash");
}

// The shortlisted proposal head (runtime/speculative/proposal_head.h) changes the drafts only:
// greedy output equals plain decoding for both kinds, with the lowest ids or a JSON list in an
// odd order (ids map back to global ids), alone and batched.
TEST(DFlashShortlist, GreedyOutputIsUnchanged) {
    const Fixture f = load_fixtures().front();
    const int64_t V = io::load_hf_config(f.dir).vocab_size;
    const auto list = scratch_path("ninfer_dflash_shortlist");
    nlohmann::json ids = nlohmann::json::array();
    for (int64_t i = V - 1; i >= 0; i -= 2) ids.push_back(i); // every other id, descending
    std::ofstream(list) << ids.dump();
    for (bool v2 : {false, true})
        for (const std::string& shortlist : {std::to_string(V / 2), list.string()}) {
            Speculation s = dflash(f, v2);
            s.draft_shortlist = shortlist;
            s.alone_ks = {3, 7};
            check_mtp_greedy_alone(EngineOptions{}, f, kIdsOnly, s);
            check_mtp_batched_and_cached(reference(), f, 7, {kLogprobScheduleAbs, 0}, s);
        }
}

TEST(DFlashErrors, BadShortlistIsAClearError) {
    const Fixture f = load_fixtures().front();
    const int64_t V = io::load_hf_config(f.dir).vocab_size;
    EngineOptions o;
    o.model_dir = f.dir;
    o.speculative = "dflash2";
    o.draft_model = drafter_dir(f, true).string();
    auto list = [&](const std::string& name, const std::string& text) {
        const auto p = scratch_path("ninfer_shortlist_" + name);
        std::ofstream(p) << text;
        return p.string();
    };
    o.draft_shortlist = std::to_string(V + 1);
    expect_start_error(o, "a count must be in [1, ");
    o.draft_shortlist = "0";
    expect_start_error(o, "a count must be in [1, ");
    o.draft_shortlist = scratch_path("ninfer_no_such_shortlist").string();
    expect_start_error(o, "--draft-shortlist: cannot open");
    o.draft_shortlist = list("object", "{\"ids\": [1, 2]}");
    expect_start_error(o, "must hold a JSON array");
    o.draft_shortlist = list("broken", "[1, 2");
    expect_start_error(o, "is not JSON");
    o.draft_shortlist = list("repeat", "[3, 4, 3]");
    expect_start_error(o, "id 3 repeats");
    o.draft_shortlist = list("range", "[1, " + std::to_string(V) + "]");
    expect_start_error(o, "outside the head");
    o.draft_shortlist = list("empty", "[]");
    expect_start_error(o, "lists no ids");
    o.draft_shortlist = list("text", "[1, \"a\"]");
    expect_start_error(o, "non-integer entry");
    o.speculative = "";
    o.draft_model.clear();
    o.draft_shortlist = "10";
    expect_start_error(o, "--draft-shortlist needs --spec mtp, dflash or dflash2");
}

TEST(DFlashErrors, MissingTensorIsNamed) {
    const Fixture f = load_fixtures().front();
    const auto dir = drafter_dir(f, false);
    const auto broken = scratch_path("ninfer_dflash_broken");
    std::filesystem::create_directories(broken);
    std::filesystem::copy_file(dir / "config.json", broken / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    io::ModelConfig target = io::load_hf_config(f.dir);
    nlohmann::json cfg = drafter_config(target, DrafterShape{});
    cfg["num_hidden_layers"] = 3; // the checkpoint has 2 layers
    cfg["layer_types"].push_back("full_attention");
    std::ofstream(broken / "config.json") << cfg.dump();
    std::filesystem::copy_file(dir / "model.safetensors", broken / "model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    EngineOptions o;
    o.model_dir = f.dir;
    o.speculative = "dflash";
    o.draft_model = broken.string();
    expect_start_error(o, "layers.2.");
    // Prefixed names are read (DFlashAcceptance.PrefixedTensorNamesLoadTheSameDrafter); two
    // prefixes at once are ambiguous, and no fc.weight at all is named.
    const io::SafetensorsCheckpoint ck = io::SafetensorsCheckpoint::open(dir);
    auto rewrite = [&](const std::vector<std::string>& prefixes) {
        std::map<std::string, io::TensorSpec> specs;
        std::map<std::string, const io::TensorEntry*> from;
        for (const auto& [name, e] : ck.entries())
            for (const std::string& p : prefixes) {
                specs[p + name] = {e.dtype_name, e.shape, e.nbytes};
                from[p + name] = &e;
            }
        std::ofstream(broken / "config.json") << drafter_config(target, DrafterShape{}).dump();
        io::write_safetensors(broken / "model.safetensors", specs, [&](const std::string& n) {
            const auto* p = static_cast<const uint8_t*>(from.at(n)->data);
            return std::vector<uint8_t>(p, p + from.at(n)->nbytes);
        });
    };
    rewrite({"model.", "draft."});
    expect_start_error(o, "several fc.weight tensors (draft.fc.weight, model.fc.weight)");
    rewrite({"model.layers.9."});
    expect_start_error(o, "has no 'fc.weight'");
}

// The attention mask of model/dflash.h: z-lab's, symmetric window |p - tau| < window; causal
// layers stop at the row, the others at the block's end.
TEST(DFlashMask, SpansFollowTheLayerKinds) {
    io::ModelConfig target;
    target.hidden_size = 64;
    target.vocab_size = 256;
    target.num_layers = 5;
    DrafterShape shape;
    shape.window = 4;
    nlohmann::json cfg = drafter_config(target, shape);
    model::DFlashConfig c = model::parse_dflash_config(cfg, "test");
    ASSERT_TRUE(c.sliding[0]);
    ASSERT_FALSE(c.sliding[1]);
    ASSERT_FALSE(c.causal[0]);
    ops::ExecContext ctx = ops::ExecContext::cpu();
    auto d = model::DFlashModel::random(c, target, ctx, 1);
    // Block at positions 10..13: row 11 in the sliding layer sees [8, 13] (|11 - tau| < 4 and
    // within the block), in the full layer [0, 13].
    EXPECT_EQ(d->span_for(0, 11, 13), std::make_pair(8, 14));
    EXPECT_EQ(d->span_for(1, 11, 13), std::make_pair(0, 14));
    EXPECT_EQ(d->span_for(0, 10, 20), std::make_pair(7, 14)); // tau - p < window too
    cfg["is_causal"] = true;
    c = model::parse_dflash_config(cfg, "test");
    d = model::DFlashModel::random(c, target, ctx, 1);
    EXPECT_EQ(d->span_for(0, 11, 13), std::make_pair(8, 12));
    EXPECT_EQ(d->span_for(1, 11, 13), std::make_pair(0, 12));
    // Without is_causal, z-lab's rule: sliding layers are causal, full ones are not.
    cfg.erase("is_causal");
    c = model::parse_dflash_config(cfg, "test");
    EXPECT_TRUE(c.causal[0]);
    EXPECT_FALSE(c.causal[1]);
}

} // namespace
} // namespace ninfer::test
