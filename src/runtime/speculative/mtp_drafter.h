// MtpDrafter: drafts with the checkpoint's MTP head (MODEL_QWEN3_5.md §3).
//
// Context. The MTP layer has its own KV in the paged pool (the same block ids as the target's
// layers). Its entry at position p is made from (embedding of token p + 1, target hidden h_p),
// so it can be written once token p + 1 is known: observe() runs the MTP over every committed
// row of the step (prompt chunks, decode rows, accepted drafts) with the ids shifted left by one
// and the target's final-normed hidden states. The MTP KV of a sequence therefore always covers
// [0, cached), also in prefix-cache entries and after preemption, and its output row at the
// last committed position (kept until the next step) is the first draft's hidden state.
//
// Drafting. propose() turns that row into draft 1 (the shared lm_head, greedy), then chains:
// step i >= 2 feeds (draft i-1, the previous MTP output after mtp.norm) at position
// cached + i - 2, appending to the MTP KV beyond the committed frontier (rewritten by the next
// observe()). Drafts are greedy, so the draft distribution is one-hot (verifier.h). The chain
// stays on the device (each step's argmax ids are the next step's tokens); the host reads the
// drafts once, after the last step. The head is the target's lm_head, or its first N rows
// (`--draft-shortlist N`, proposal_head.h): each draft then reads N of the V rows, and drafts are
// ids below N.
//
// Graphs (CUDA): the draft chain (propose_graphs.h) and the alignment after steps whose entries
// all ran the same rows (observe_graphs.h) replay CUDA graphs. Sabotage arm for the alignment
// graphs' acceptance gate (tests/cuda/test_cuda_mtp_acceptance.cpp; NINFER_MTP_SABOTAGE, read
// by enable_graphs): observe_unshifted makes the graphed rows embed their own token instead of
// the next one, which leaves every output right and only lowers acceptance.
#pragma once

#include "model/qwen3_5.h"
#include "ops/exec_context.h"
#include "runtime/cache_store.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/observe_graphs.h"
#include "runtime/speculative/propose_graphs.h"

namespace ninfer::runtime {

class MtpDrafter : public Drafter {
public:
    // head: the rows drafts come from (the lm_head, or its first rows: proposal_head.h).
    MtpDrafter(const ops::ExecContext& ctx, model::Qwen35Model& model, const CacheStore& cache,
               int32_t block_size, int64_t token_limit, const ProposalHead& head);
    const char* name() const override { return "mtp"; }
    void propose(const StepPlan& plan) override;
    void observe(const StepPlan& plan, const TensorView& hidden, bool align_decode) override;
    // CUDA: chains whose sequences all draft the same K replay graphs (propose_graphs.h), and
    // so do alignments after steps whose entries all ran the same rows (observe_graphs.h);
    // parts: which of the two (DraftGraphs::from_env).
    void enable_graphs(const DecodeGraphs::Layout& layout, const DraftGraphs& parts);
    void warm_graphs(int32_t bucket, int32_t rows) override;
    int64_t graph_replays() const override { return graphs_ ? graphs_->replays() : 0; }
    int64_t observe_graph_replays() const override {
        return observe_graphs_ ? observe_graphs_->replays() : 0;
    }
    int64_t graph_warmups() const override {
        return (graphs_ ? graphs_->warmups() : 0) +
               (observe_graphs_ ? observe_graphs_->warmups() : 0);
    }

private:
    // Greedy ids of rows' logits under the shared lm_head into ids [n] (device, no sync).
    void greedy(const TensorView& rows, const TensorView& ids);
    TensorView buffer(Tensor& t, int64_t rows, int64_t cols, DType dtype);
    // observe() for a plan ObserveGraphs takes: the MTP over every row of the step.
    void observe_from_graph(const StepPlan& plan, const TensorView& hidden);
    // s's MTP context now ends at aligned_end, its last output row at last_row of context_.
    void mark_aligned(Sequence& s, int32_t last_row, int64_t aligned_end);

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    const CacheStore& cache_;
    int32_t block_size_;
    int64_t token_limit_; // drafts are ids below it (and below head_'s rows)
    const ProposalHead& head_;
    Tensor context_out_; // the eager observe's MTP output [T, H]
    TensorView context_; // the last observe's MTP output rows: the next drafts' first hidden
    Tensor chain_[2]; // [n, H] hidden rows of propose's chain steps (and observe's input)
    Tensor logits_, lse_, top_;
    Tensor draft_ids_; // [K, n] I32: propose's drafts, downloaded once per step
    Tensor row_ids_;
    StepBuffers buffers_;
    std::unique_ptr<ProposeGraphs> graphs_;
    std::unique_ptr<ObserveGraphs> observe_graphs_;
};

} // namespace ninfer::runtime
