// ObserveGraphs: CUDA-graph replay of the MTP alignment (MtpDrafter::observe) after a step whose
// entries all ran W rows: W = 1 (a decode token each) or W = 1 + K (an anchor and K verified
// drafts). The graph for (bucket B, W) runs the MTP layer over all B * W rows, entry j's rows at
// positions cached .. cached + W - 1 of its own KV blocks, row i embedding token cached + i + 1
// and taking the target's hidden row j * W + i. Rows past an entry's committed ones (rejected
// drafts) carry token 0: they land beyond the MTP frontier, where the next draft chain and the
// next alignment write before anything reads (attention at position p reads keys <= p only), as
// the eager chain's rows already do. The committed rows compute what the eager alignment
// computes (the same rows of the same MTP, over more rows). Sequences S..B-1 are padding: token
// 0 at positions 0..W-1 in the padding KV block, state row padding_row. The target's hidden rows
// are copied into the slot's input outside the graph (their buffer may move); the output rows
// [B * W, H] stay in one shared buffer until the next run. The first run of a (B, W) is eager,
// the second captures, later ones replay; a scratch reallocation invalidates every graph.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "model/qwen3_5.h"
#include "runtime/decode_graphs.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

class ObserveGraphs {
public:
    // layout: the decode graphs' block and context bounds, max_seqs and padding row and block
    // (its hidden_size, feature layers and verify rows are not used). token_shift: row i embeds
    // token cached + i + token_shift (1; 0 only as the acceptance gate's sabotage arm).
    ObserveGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                  const DecodeGraphs::Layout& layout, int32_t token_shift = 1);
    ~ObserveGraphs();

    // The rows W every entry ran when the alignment of this plan can replay a graph, else 0:
    // every entry generated (one own row, drafts or not) over W rows, is not done, keeps its
    // drafter on, has no media, knows the token after each committed row and fits the layout,
    // and the MTP over bucket * W rows is capturable.
    int32_t width(const StepPlan& plan) const;
    // Aligns the MTP over the plan's rows (width(plan) > 0). hidden: the target's final-normed
    // hidden rows of the step [S * W, H]. Returns the MTP output rows [S * W, H], entry j's
    // rows at j * W (valid until the next run).
    TensorView run(const StepPlan& plan, const TensorView& hidden, const model::CacheViews& caches);
    // Captures the graph of (bucket, W) ahead of its first run (engine start-up), every
    // sequence padding; false where no run of that shape would replay a graph.
    bool warm(int32_t bucket, int32_t W, const model::CacheViews& caches);
    int64_t replays() const { return runs_.replays; } // graph launches (not the eager runs)
    int64_t warmups() const { return runs_.warmups; } // eager first runs and captures

private:
    struct Slot;
    Slot& slot_for(int32_t seqs, int32_t width);
    void fill(Slot& s, const StepPlan& plan);
    bool shape_replays(int32_t bucket, int32_t W) const; // width()'s bounds for a shape

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    DecodeGraphs::Layout layout_;
    Tensor out_; // [capacity rows, H]: every slot's output
    int64_t capacity_rows_ = 0;
    int32_t token_shift_ = 1;
    std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Slot>> slots_;
    GraphRuns runs_;
};

} // namespace ninfer::runtime
