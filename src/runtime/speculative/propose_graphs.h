// ProposeGraphs: CUDA-graph replay of the MTP draft chain (mtp_drafter.h) when every drafting
// sequence of a step asks for the same K: a graph per (bucket B, K) runs draft 1's lm_head and
// argmax, then K - 1 chained MTP steps, each with its lm_head and argmax, over device buffers
// whose addresses and launch shapes are fixed for (B, K) (block tables padded to the engine's
// longest sequence, attention sized for its max context). Sequences n..B-1 are padding: their
// MTP rows run at positions 0..K-2 in the padding KV block and their drafts are dropped. The
// first draft's hidden rows are gathered eagerly (observe's output buffer moves), the graph
// replays, and the host reads the drafts once. The first run of a (B, K) is eager, the second
// captures, later ones replay; a scratch reallocation invalidates every graph.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "model/qwen3_5.h"
#include "ops/memory.h"
#include "runtime/decode_graphs.h"
#include "runtime/speculative/proposal_head.h"
#include "runtime/sequence.h"

namespace ninfer::runtime {

class ProposeGraphs {
public:
    // At most this many sequences draft in one step (the engine's verification groups).
    static constexpr int32_t kMaxSeqs = 8;
    static constexpr int32_t kMaxDrafts = 8;

    // layout: the decode graphs' block and context bounds and padding row and block (its
    // hidden_size and verify rows are not used); drafts are ids below token_limit, from the
    // rows of head (the lm_head or its first rows: proposal_head.h).
    ProposeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                  const DecodeGraphs::Layout& layout, int64_t token_limit,
                  const ProposalHead& head);
    ~ProposeGraphs();

    // Whether these sequences, ordered, each with drafts.size() == K, can draft from a graph.
    bool eligible(const std::vector<Sequence*>& seqs) const;
    // Fills every sequence's drafts. first_hidden: the MTP output rows [*, H] that rows index
    // (each sequence's draft_row).
    void run(const std::vector<Sequence*>& seqs, const TensorView& first_hidden,
             const model::CacheViews& caches);
    // Captures the graph of (bucket, K) ahead of its first run (engine start-up), every
    // sequence padding; false where no run of that shape would replay a graph.
    bool warm(int32_t bucket, int32_t k, const model::CacheViews& caches);
    int64_t replays() const { return runs_.replays; }
    int64_t warmups() const { return runs_.warmups; } // eager first runs and captures

private:
    struct Slot;
    Slot& slot_for(int32_t bucket, int32_t k);
    void fill(Slot& s, const std::vector<Sequence*>& seqs);
    void body(Slot& s, const model::CacheViews& caches);
    void greedy(Slot& s, const TensorView& rows, const TensorView& ids);

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    DecodeGraphs::Layout layout_;
    int64_t token_limit_;
    const ProposalHead& head_;
    std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Slot>> slots_;
    Tensor logits_; // [kMaxSeqs, head rows] F32, shared (one run at a time)
    GraphRuns runs_;
};

} // namespace ninfer::runtime
