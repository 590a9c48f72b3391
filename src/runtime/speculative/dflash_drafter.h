// DFlashDrafter: drafts with a DFlash or DFlash2 block-diffusion drafter (model/dflash.h).
//
// Context. The drafter's context K/V live in the paged KV pool as layers of their own (the
// sequence's block ids, CacheViews::draft_*), so the prefix cache, copy-on-write and preemption
// carry them with the target's KV. Entry p is made from the target's residual stream after the
// tap layers at row p (ForwardBatch::features), which exists as soon as row p has run: observe()
// writes the context of every committed row of the step (prompt chunks, decode rows, accepted
// drafts), after the verifier has decided what stays, so a rejected draft never reaches it (the
// deferred context commit of upstream's DFlash). The context of a sequence therefore covers
// [0, cached), and the next proposal's anchor is its last token, at position cached.
//
// Proposal. Every drafting sequence runs one block [anchor, MASK x K] at positions
// cached .. cached + K (K: the step's largest draft count; shorter requests take a prefix), all
// sequences in one drafter forward. The block's own K/V go to the pool beyond the committed
// frontier (scratch; the next context write replaces them). The mask rows' hidden states go
// through the proposal head (proposal_head.h: the target's lm_head, or a shortlist of it whose
// ids map back to global ids before the walk):
//   DFlash: each draft is the argmax of its row (greedy, one-hot q);
//   DFlash2: the top-k candidates of each row and the selector's conditional walk
//     (ops::dflash_select). Greedy requests walk greedily (q one-hot on the walk's choice);
//     sampled requests sample each step from softmax(e / temperature) over the k candidates
//     (their temperature; u from the draft position's proposal stream) and keep that sparse
//     q with its ids (Sequence::draft_q), which the verifier's p/q rejection uses.
// Either way verification is exact (verifier.h); the sparse q only raises acceptance.
//
// Graphs (CUDA, enable_graphs; dflash_propose_graphs.cpp). A proposal whose n <= 8 sequences
// all draft the same K and whose head needs no host step (greedy walks; DFlash2 without an id
// map, output multiplier or soft cap) replays a graph captured for (n, K): the drafter forward,
// the mask-row gather, the head, the top-k and, for DFlash2, the selector walk, over buffers
// whose addresses and launch shapes are fixed for (n, K) (block tables padded to the engine's
// longest sequence). There is no padding (a graph per n), so no row of a graph reads a KV block
// its sequence does not own. The host fills the inputs, replays, and downloads the drafts once.
// The engine captures every (n, K) a step may draft with at start-up (warm_graphs, over
// padding sequences); otherwise the first run of an (n, K) is eager, the second captures, later
// ones replay. A drafter scratch or logits buffer that moves invalidates every graph.
// NINFER_DFLASH_GREEDY_WALK=1 (diagnostic, read at construction) walks greedily for sampled
// requests too, the one-hot baseline of the sparse q.
//
// Sabotage arms for the acceptance gate (NINFER_DFLASH_SABOTAGE, read at construction), faults
// that leave every output right and only lower acceptance (tests/model/test_dflash_acceptance.cpp):
// shift_taps takes every tap one layer later; swap_ranks (DFlash2) swaps the selector's scores
// of the first two candidates.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "model/dflash.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"
#include "runtime/cache_store.h"
#include "runtime/decode_graphs.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/proposal_head.h"

namespace ninfer::runtime {

class DFlashDrafter : public Drafter {
public:
    // head: the target's lm_head whole or a shortlist of it (proposal_head.h); it outlives the
    // drafter.
    DFlashDrafter(const ops::ExecContext& ctx, model::Qwen35Model& target,
                  model::DFlashModel& drafter, const ProposalHead& head, const CacheStore& cache,
                  int32_t block_size, int64_t token_limit);
    const char* name() const override;
    std::vector<int32_t> feature_layers() const override;
    void propose(const StepPlan& plan) override;
    void observe(const StepPlan& plan, const TensorView& features, bool align_decode) override;
    // CUDA: proposals of the same (n, K) replay graphs (dflash_propose_graphs.cpp). layout: the
    // decode graphs' block and context bounds.
    void enable_graphs(const DecodeGraphs::Layout& layout);
    // Start-up capture of the proposal graphs of K = rows - 1 for every n a step of `bucket`
    // sequences may draft with (bucket / 2 < n <= bucket; graphs are keyed by n), each over n
    // padding sequences (the layout's padding state row and KV block; the block rows' K/V are
    // scratch). The engine calls the largest shapes first, so the logits buffer is sized once.
    void warm_graphs(int32_t bucket, int32_t rows) override;
    int64_t graph_replays() const override { return graph_runs_.replays; }
    int64_t graph_warmups() const override { return graph_runs_.warmups; }

private:
    struct GraphSlot; // the buffers and graph of one (n, K)
    // Whether these drafting sequences (each with drafts) can propose from a graph.
    bool graph_eligible(const std::vector<Sequence*>& seqs) const;
    // Whether the drafter's configuration lets any proposal replay a graph (no host step in its
    // head: DFlash2's id map, score transform or sabotage arm).
    bool graph_config_eligible() const;
    // The graphs' logits [M, head rows], bumping the graph generation when the buffer or the
    // drafter scratch moved (every captured graph is then stale).
    TensorView graph_logits(int64_t M);
    // propose() from the (n, K) graph; fills every sequence's drafts.
    void propose_from_graph(const std::vector<Sequence*>& seqs);
    GraphSlot& graph_slot(int32_t n, int32_t K);
    void fill_graph_slot(GraphSlot& g, const std::vector<Sequence*>& seqs);
    void graph_body(GraphSlot& g, const TensorView& logits);
    // The rows of the SpanBatch of layer `layer`'s kind for blocks at F_j = cached of seqs,
    // block j spanning positions F_j .. F_j + drafts_j.
    void span_rows(int64_t layer, const std::vector<Sequence*>& seqs, std::vector<int32_t>& table_row,
                   std::vector<int32_t>& begin, std::vector<int32_t>& end) const;

    TensorView buffer(Tensor& t, int64_t rows, int64_t cols, DType dtype);
    TensorView upload_i32(Tensor& t, const std::vector<int32_t>& values);
    // Drafts [n, K] of the mask rows' hidden states [n K, H] of seqs (the anchors: each
    // block's first token); a sampled DFlash2 walk also sets the sequence's draft_q.
    std::vector<int32_t> choose(const TensorView& rows, const std::vector<Sequence*>& seqs,
                                int64_t K, const std::vector<int32_t>& anchors);
    float walk_temperature(const Sequence& seq) const;

    ops::ExecContext ctx_;
    model::Qwen35Model& target_;
    model::DFlashModel& drafter_;
    const CacheStore& cache_;
    int32_t block_size_;
    int64_t token_limit_;
    const ProposalHead& head_;
    StepBuffers buffers_;
    Tensor positions_, row_ids_, segments_, out_, rows_, logits_, lse_, top_ids_, top_values_;
    Tensor gproj_, unary_, anchors_, path_, q_, uniforms_, gathered_, cand_;
    // One SpanBatch per layer kind: its host arrays and device copies.
    struct Spans {
        std::vector<int32_t> table_row, begin, end;
        Tensor d_table_row, d_begin, d_end;
        ops::SpanBatch batch;
    };
    std::vector<Spans> spans_;
    std::vector<int> layer_kind_;             // each drafter layer's SpanBatch
    std::vector<int64_t> kind_first_layer_;   // a layer of each kind (its span rule)
    bool shift_taps_ = false, swap_ranks_ = false; // the sabotage arms
    bool greedy_walk_ = false; // NINFER_DFLASH_GREEDY_WALK=1: one-hot walks for sampled requests
    // Graphs: on or off, the layout, the slots, and what invalidates them.
    DecodeGraphs::Layout graph_layout_{};
    bool graphs_on_ = false;
    // shared_ptr: GraphSlot is complete only in dflash_propose_graphs.cpp.
    std::map<std::pair<int32_t, int32_t>, std::shared_ptr<GraphSlot>> graph_slots_;
    int64_t graph_generation_ = 0, seen_scratch_generation_ = -1;
    const void* seen_logits_ = nullptr;
    GraphRuns graph_runs_;
};

} // namespace ninfer::runtime
