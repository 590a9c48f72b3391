// DFlash2 acceptance on the demo model, measured as tools/train_demo/train_dflash.py measures it
// in PyTorch (tools/dflash/reference.py generate(); its figures in
// models/ninfer-demo/dflash2/eval.json, its prompts mtp_eval.json's): every prompt is continued
// greedily for G tokens with the shipped drafter at K drafts a round, and the mean accepted
// drafts per round and the per-position acceptance must match PyTorch's within
// kAcceptanceTolerance. The outputs must also equal plain decoding, and acceptance must be far
// above zero (a drafter fault that leaves outputs right shows up here, not in exactness tests).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"

#include "model/mtp_acceptance.h"

namespace ninfer::test {

struct DFlashEval {
    int draft_tokens = 0, continuation_tokens = 0;
    double mean_accepted = 0;
    std::vector<double> per_position;
    // The first round after fixed windows (each prompt cut at first_round_cuts tokens), by
    // PyTorch in f32 (first_round) and in bf16 (first_round_bf16: every module in bf16).
    std::vector<int> first_round_cuts;
    struct FirstRound {
        int windows = 0;
        double mean = 0;
        std::vector<double> per_position;
    };
    FirstRound first_round, first_round_bf16;
};

inline DFlashEval load_dflash_eval(const std::string& model_dir) {
    DFlashEval e;
    std::ifstream in(std::filesystem::path(model_dir) / "dflash2" / "eval.json");
    if (!in) return e;
    const nlohmann::json j = nlohmann::json::parse(in);
    e.draft_tokens = j.at("draft_tokens").get<int>();
    e.continuation_tokens = j.at("continuation_tokens").get<int>();
    e.mean_accepted = j.at("pytorch").at("mean_accepted").get<double>();
    e.per_position = j.at("pytorch").at("accepted_per_position").get<std::vector<double>>();
    const auto first_round = [&](const char* key, DFlashEval::FirstRound& out) {
        if (!j.contains(key)) return;
        const nlohmann::json& f = j.at(key);
        e.first_round_cuts = f.at("cuts").get<std::vector<int>>();
        out.windows = f.at("windows").get<int>();
        out.mean = f.at("mean_accepted").get<double>();
        out.per_position = f.at("accepted_per_position").get<std::vector<double>>();
    };
    first_round("first_round", e.first_round);
    first_round("first_round_bf16", e.first_round_bf16);
    return e;
}

// ninfer's totals over the eval's prompts (each output checked against plain decoding).
inline SpeculativeStats measure_dflash_acceptance(EngineOptions options, const MtpEval& prompts,
                                                  const DFlashEval& want) {
    options.model_dir = prompts.model_dir;
    Speculation s;
    s.method = "dflash2"; // the drafter the demo model ships (<model>/dflash2)
    s.draft_model = options.draft_model; // empty: the demo's own
    s.draft_shortlist = options.draft_shortlist;
    options.draft_model.clear(); // the plain engine has no drafter
    options.draft_shortlist.clear();
    Engine plain(options), spec(with_spec(options, s, want.draft_tokens));
    SpeculativeStats total;
    for (const auto& p : prompts.prompts) {
        const GenerationRequest r = greedy_request(p, want.continuation_tokens, 0);
        const Generated got = run_one(spec, r);
        expect_same_output(got.tokens, run_one(plain, r).tokens, kIdsOnly, "dflash2 demo");
        total.merge(got.timings.speculative);
    }
    return total;
}

// Drafts accepted per round of sampled requests (temperature, top-k off, seed i + 1 for prompt
// i) over the eval's prompts, with DFlash2's sampled walk and its sparse q, or with the greedy
// walk's one-hot drafts (NINFER_DFLASH_GREEDY_WALK=1, read when the engine starts).
inline double sampled_acceptance(EngineOptions options, const MtpEval& prompts,
                                 const DFlashEval& want, float temperature, bool greedy_walk) {
    options.model_dir = prompts.model_dir;
    Speculation s;
    s.method = "dflash2";
    if (greedy_walk) setenv("NINFER_DFLASH_GREEDY_WALK", "1", 1);
    Engine spec(with_spec(options, s, want.draft_tokens));
    unsetenv("NINFER_DFLASH_GREEDY_WALK");
    SpeculativeStats total;
    for (size_t i = 0; i < prompts.prompts.size(); ++i) {
        GenerationRequest r = greedy_request(prompts.prompts[i], want.continuation_tokens, 0);
        r.sampling.greedy = false;
        r.sampling.temperature = temperature;
        r.sampling.seed = uint64_t(i) + 1;
        total.merge(run_one(spec, r).timings.speculative);
    }
    return total.rounds ? double(total.accepted) / double(total.rounds) : 0.0;
}

// A shortlist of every id in another order proposes the full head's drafts: the acceptance is
// the full head's (a wrong id map would collapse it). A shortlist of the lowest half of the
// ids still lands drafts. The first 16 prompts of the eval.
inline void check_shortlist_maps_ids_back(const EngineOptions& options) {
    MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0) << "models/ninfer-demo/dflash2/eval.json is missing";
    if (prompts.prompts.size() > 16) prompts.prompts.resize(16);
    const int64_t V = io::load_hf_config(prompts.model_dir).vocab_size;
    const auto list = scratch_path("ninfer_demo_shortlist");
    nlohmann::json ids = nlohmann::json::array();
    for (int64_t i = 0; i < V; ++i) ids.push_back((i * 2053) % V); // a permutation (2053 odd prime)
    std::ofstream(list) << ids.dump();
    auto mean = [&](const std::string& shortlist) {
        EngineOptions o = options;
        o.draft_shortlist = shortlist;
        const SpeculativeStats s = measure_dflash_acceptance(o, prompts, want);
        return s.rounds ? double(s.accepted) / double(s.rounds) : 0.0;
    };
    const double full = mean(""), permuted = mean(list.string()), half = mean(std::to_string(V / 2));
    std::printf("dflash2 demo: %.4f accepted a round (full head), %.4f (permuted shortlist), "
                "%.4f (ids below %lld)\n", full, permuted, half, static_cast<long long>(V / 2));
    EXPECT_NEAR(permuted, full, 0.01);
    EXPECT_GT(half, 0.5 * full);
}

// The shipped drafter with every tensor name prefixed by "model." (as trainers that wrap the
// drafter save it) is the same drafter: the same acceptance, exactly. The first 8 prompts.
inline void check_prefixed_names_load_the_same_drafter(const EngineOptions& options) {
    MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0) << "models/ninfer-demo/dflash2/eval.json is missing";
    if (prompts.prompts.size() > 8) prompts.prompts.resize(8);
    const std::filesystem::path shipped = std::filesystem::path(prompts.model_dir) / "dflash2";
    const std::filesystem::path prefixed = scratch_path("ninfer_demo_dflash2_prefixed");
    std::filesystem::create_directories(prefixed);
    std::filesystem::copy_file(shipped / "config.json", prefixed / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    const io::SafetensorsCheckpoint ck = io::SafetensorsCheckpoint::open(shipped);
    std::map<std::string, io::TensorSpec> specs;
    for (const auto& [name, e] : ck.entries())
        specs["model." + name] = {e.dtype_name, e.shape, e.nbytes};
    io::write_safetensors(prefixed / "model.safetensors", specs, [&](const std::string& name) {
        const io::TensorEntry& e = *ck.find(name.substr(6));
        const auto* p = static_cast<const uint8_t*>(e.data);
        return std::vector<uint8_t>(p, p + e.nbytes);
    });
    auto stats = [&](const std::string& dir) {
        EngineOptions o = options;
        o.draft_model = dir;
        return measure_dflash_acceptance(o, prompts, want);
    };
    const SpeculativeStats a = stats(shipped.string()), b = stats(prefixed.string());
    ASSERT_GT(a.rounds, 0);
    EXPECT_EQ(b.rounds, a.rounds);
    EXPECT_EQ(b.accepted, a.accepted);
    std::printf("dflash2 demo: %lld of %lld rounds' drafts accepted with bare and \"model.\" "
                "names alike\n", static_cast<long long>(a.accepted),
                static_cast<long long>(a.rounds));
}

// Drafts accepted in the first round after each fixed window (every eval prompt cut at each of
// eval.json's first_round cuts; tools/dflash/reference.py first_round_accepted), totalled: the
// windows, the accepted drafts, and per position those accepted with every earlier draft.
struct FirstRounds {
    int64_t windows = 0, accepted = 0;
    std::vector<int64_t> at;
};
inline FirstRounds measure_first_rounds(EngineOptions options, const MtpEval& prompts,
                                        const DFlashEval& want) {
    options.model_dir = prompts.model_dir;
    options.prefix_cache = false; // each window from scratch, as PyTorch computes it
    Speculation s;
    s.method = "dflash2";
    Engine spec(with_spec(options, s, want.draft_tokens));
    FirstRounds r;
    r.at.assign(size_t(want.draft_tokens), 0);
    for (const auto& p : prompts.prompts)
        for (int cut : want.first_round_cuts) {
            if (size_t(cut) > p.size()) continue;
            const std::vector<int32_t> window(p.begin(), p.begin() + cut);
            // The anchor, K drafts and the bonus: the first round drafts all K.
            const Generated got = run_one(spec, greedy_request(window, want.draft_tokens + 2, 0));
            const int a = got.timings.speculative.first_round_accepted;
            EXPECT_GE(a, 0) << "no round after a window of " << cut;
            ++r.windows;
            r.accepted += std::max(a, 0);
            for (int i = 0; i < a; ++i) ++r.at[size_t(i)];
        }
    return r;
}

// The first round's acceptance on the fixed windows against PyTorch's in the engine's precision
// (eval.json first_round; for a bf16 engine first_round_bf16), per position and on average,
// within kAcceptanceTolerance. The gate for a precision whose generated text diverges from the
// f32 reference's: PyTorch's own bf16 is 0.035 to 0.078 drafts a round off its f32 over the
// continuations, 0.013 on these windows (0.683 against 0.6696), and ninfer's CUDA bf16 0.022
// (0.6920; H100, nineteenth session), so a bf16 engine is held to PyTorch's bf16.
inline void check_dflash_first_round(const EngineOptions& options) {
    const MtpEval prompts = load_mtp_eval();
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    const bool bf16 = options.dtype == "bf16";
    const DFlashEval::FirstRound& ref = bf16 ? want.first_round_bf16 : want.first_round;
    ASSERT_FALSE(want.first_round_cuts.empty() || ref.windows == 0)
        << "models/ninfer-demo/dflash2/eval.json has no "
        << (bf16 ? "first_round_bf16" : "first_round") << " (train_dflash.py --eval-only keep"
        << (bf16 ? " --eval-dtype bf16)" : ")");
    const FirstRounds got = measure_first_rounds(options, prompts, want);
    ASSERT_EQ(got.windows, ref.windows);
    const double mean = double(got.accepted) / double(got.windows);
    EXPECT_NEAR(mean, ref.mean, kAcceptanceTolerance)
        << "first-round drafts accepted, ninfer against PyTorch";
    for (size_t i = 0; i < ref.per_position.size() && i < got.at.size(); ++i)
        EXPECT_NEAR(double(got.at[i]) / double(got.windows), ref.per_position[i],
                    kAcceptanceTolerance)
            << "first round, position " << i;
    EXPECT_GT(got.at.empty() ? 0.0 : double(got.at[0]) / double(got.windows), 0.1);
    std::printf("dflash2 demo: first round after %lld windows, %.4f accepted (PyTorch %s %.4f)\n",
                static_cast<long long>(got.windows), mean, bf16 ? "bf16" : "f32", ref.mean);
}

inline void check_dflash_acceptance(EngineOptions options) {
    const MtpEval prompts = load_mtp_eval();
    ASSERT_FALSE(prompts.prompts.empty()) << "models/ninfer-demo/mtp_eval.json is missing";
    const DFlashEval want = load_dflash_eval(prompts.model_dir);
    ASSERT_GT(want.draft_tokens, 0) << "models/ninfer-demo/dflash2/eval.json is missing";
    const SpeculativeStats total = measure_dflash_acceptance(options, prompts, want);
    ASSERT_GT(total.rounds, 0);
    const double mean = double(total.accepted) / double(total.rounds);
    EXPECT_NEAR(mean, want.mean_accepted, kAcceptanceTolerance)
        << "accepted drafts per round, ninfer against PyTorch";
    for (size_t i = 0; i < want.per_position.size() && i < total.drafted_at.size(); ++i) {
        const double got = double(total.accepted_at[i]) / double(total.drafted_at[i]);
        EXPECT_NEAR(got, want.per_position[i], kAcceptanceTolerance) << "position " << i;
    }
    // Well above zero: a drafter that never lands a draft is broken, whatever its outputs.
    EXPECT_GT(total.accepted_at.empty() ? 0.0
                                        : double(total.accepted_at[0]) / double(total.drafted_at[0]),
              0.1);
    std::printf("dflash2 demo: %lld rounds, %.4f accepted a round (PyTorch %.4f)\n",
                static_cast<long long>(total.rounds), mean, want.mean_accepted);
}

} // namespace ninfer::test
