// Drafter: the proposal half of speculative decoding. Every step the scheduler gives some
// decoding sequences K draft slots (seq->drafts, sized); the drafter fills them with tokens that
// continue seq->tokens, the target verifies [anchor, drafts] in one forward (verifier.h), and
// the drafter then observes what was committed, so its own context (MTP: the MTP layer's KV)
// stays aligned with the target's. MTP is the first drafter; DFlash drafters implement the
// same interface.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

// Which of a drafter's CUDA graphs are on: `chain` (the MTP draft chain), `observe` (the MTP
// alignment) and `dflash` (the DFlash proposal). NINFER_DRAFT_GRAPHS, a comma-separated list of
// those names or "none", replaces the default set (kDefault), to measure what each part saves.
struct DraftGraphs {
    static constexpr const char* kDefault = "chain,observe,dflash";
    bool chain = false, observe = false, dflash = false;
    static DraftGraphs parse(const char* list) {
        std::string padded(1, ',');
        padded.append(list).push_back(',');
        auto has = [&](const char* part) {
            std::string needle(1, ',');
            needle.append(part).push_back(',');
            return padded.find(needle) != std::string::npos;
        };
        DraftGraphs g;
        g.chain = has("chain");
        g.observe = has("observe");
        g.dflash = has("dflash");
        return g;
    }
    static DraftGraphs from_env() {
        const char* env = std::getenv("NINFER_DRAFT_GRAPHS");
        return parse(env ? env : kDefault);
    }
};

class Drafter {
public:
    virtual ~Drafter() = default;
    virtual const char* name() const = 0;
    // The target layers whose residual streams observe() takes (ForwardBatch::features, layer i
    // in columns [i H, (i + 1) H)); empty: it takes the final-normed hidden states.
    virtual std::vector<int32_t> feature_layers() const { return {}; }
    // Fills seq->drafts of every entry that has draft slots. Only sequences with
    // seq->draft_ready get them (the scheduler's rule).
    virtual void propose(const StepPlan& plan) = 0;
    // After the step's verification: every entry's first `committed` rows stay. hidden: the
    // target's final-normed hidden state of every row of the step [T, H], or with
    // feature_layers() its features [T, n H]. Sets
    // seq->draft_ready for the sequences whose drafter context now reaches their last token.
    // align_decode false: plain decode rows are not aligned (the policy settled on plain
    // decoding); their sequences stop drafting for good (seq->drafter_off).
    virtual void observe(const StepPlan& plan, const TensorView& hidden,
                         bool align_decode) = 0;
    // Captures, ahead of their first use (engine start-up), the graphs that a step of `bucket`
    // sequences with `rows` rows each (1: decode; 1 + K: verification of K drafts) replays in
    // this drafter: its proposal of K drafts and its alignment. Drafters without such graphs,
    // or whose graphs need real sequences, capture on first use instead.
    virtual void warm_graphs(int32_t bucket, int32_t rows) {
        (void)bucket;
        (void)rows;
    }
    // Proposals replayed from CUDA graphs so far (0 where the drafter has none).
    virtual int64_t graph_replays() const { return 0; }
    // Alignments (observe) replayed from CUDA graphs so far (0 where the drafter has none).
    virtual int64_t observe_graph_replays() const { return 0; }
    // Graph runs that warmed up (eager first runs) or captured, so far: a step during which
    // this grew is no measure of what drafting costs (the draft policy leaves it out).
    virtual int64_t graph_warmups() const { return 0; }
};

} // namespace ninfer::runtime
