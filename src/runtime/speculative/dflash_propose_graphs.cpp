// DFlashDrafter's proposal from CUDA graphs (dflash_drafter.h, "Graphs"): one graph per (n, K)
// of the drafter forward, the mask-row gather, the proposal head, its top-k and (DFlash2) the
// selector's greedy walk, over buffers fixed for (n, K).
#include <algorithm>

#include "core/error.h"
#include "ops/dflash.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/logits.h"
#include "ops/memory.h"
#include "runtime/speculative/dflash_drafter.h"

namespace ninfer::runtime {
namespace {

// At most this many sequences draft in one step (the engine's verification groups).
constexpr int32_t kGraphMaxSeqs = 8;
constexpr int32_t kGraphMaxDrafts = 15; // DFlash's K = 1..15

} // namespace

struct DFlashDrafter::GraphSlot {
    int32_t n = 0, k = 0; // sequences and drafts each: T = n (K + 1) block rows, M = n K
    // Host mirrors. Fixed for (n, K): row_begin and segments [n + 1] (= j (K + 1)), mask_rows
    // [M]. Per proposal: tokens and positions [T], pos_begin, slots and anchors [n], the block
    // table [n, max_blocks], and each layer kind's span rows [T].
    std::vector<int32_t> row_begin, mask_rows, tokens, positions, pos_begin, slots, anchors, table;
    Tensor d_row_begin, d_mask_rows, d_tokens, d_positions, d_pos_begin, d_slots, d_anchors,
        d_table;
    std::vector<Spans> spans; // one per layer kind, as the eager path's spans_
    model::DFlashBlocks blocks;
    std::vector<const ops::SpanBatch*> layer_spans;
    Tensor out, picked, lse, ids, values, g, path, q; // the body's outputs and intermediates
    GraphReplay replay;
};

void DFlashDrafter::enable_graphs(const DecodeGraphs::Layout& layout) {
    graph_layout_ = layout;
    graphs_on_ = !ctx_.device.is_cpu();
}

bool DFlashDrafter::graph_eligible(const std::vector<Sequence*>& seqs) const {
    const model::DFlashConfig& c = drafter_.config();
    const int32_t n = int32_t(seqs.size());
    const size_t K = seqs.front()->drafts.size();
    if (n < 1 || n > kGraphMaxSeqs || K < 1 || K > size_t(kGraphMaxDrafts)) return false;
    // The head's host steps (choose): DFlash2's id map, its score transform, the sabotage arm.
    if (c.v2 && (head_.maps_ids() || c.output_multiplier != 1.0 || c.logit_softcap > 0 ||
                 swap_ranks_))
        return false;
    for (const Sequence* s : seqs)
        if (s->drafts.size() != K ||
            int32_t(s->blocks.size()) > graph_layout_.max_blocks_per_seq ||
            (c.v2 && walk_temperature(*s) != 0.0f)) // a sampled walk keeps its q on the host
            return false;
    return true;
}

DFlashDrafter::GraphSlot& DFlashDrafter::graph_slot(int32_t n, int32_t K) {
    auto& slot = graph_slots_[{n, K}];
    if (slot) return *slot;
    slot = std::make_shared<GraphSlot>();
    GraphSlot& g = *slot;
    g.n = n;
    g.k = K;
    const model::DFlashConfig& c = drafter_.config();
    const int32_t W = K + 1, T = n * W, M = n * K;
    const int64_t MB = graph_layout_.max_blocks_per_seq, H = c.hidden_size;
    Allocator& a = ops::device_allocator(ctx_.device);
    auto i32 = [&](int64_t count) { return Tensor::empty(a, DType::I32, {count}); };
    auto put = [&](std::vector<int32_t>& v, const Tensor& t) {
        ops::upload(ctx_,
                    TensorView::contiguous(v.data(), DType::I32, Device::cpu(),
                                           {int64_t(v.size())}),
                    t.view());
    };
    for (int32_t j = 0; j <= n; ++j) g.row_begin.push_back(j * W);
    for (int32_t j = 0; j < n; ++j)
        for (int32_t i = 0; i < K; ++i) g.mask_rows.push_back(j * W + 1 + i);
    g.d_row_begin = i32(n + 1);
    g.d_mask_rows = i32(M);
    put(g.row_begin, g.d_row_begin);
    put(g.mask_rows, g.d_mask_rows);
    g.d_tokens = i32(T);
    g.d_positions = i32(T);
    g.d_pos_begin = i32(n);
    g.d_slots = i32(n);
    g.d_anchors = i32(n);
    g.d_table = i32(n * MB);
    g.table.assign(size_t(n * MB), 0);
    // The blocks as n sequences of W rows (their KV writes), launch shapes fixed for (n, K).
    model::DFlashBlocks& b = g.blocks;
    b.tokens = g.d_tokens.view();
    b.positions = g.d_positions.view();
    b.host_segments = g.row_begin.data();
    b.segments = g.d_row_begin.view();
    ops::SeqBatch& q = b.seqs;
    q.num_seqs = n;
    q.num_rows = T;
    q.max_rows_per_seq = W;
    q.max_context = graph_layout_.max_context;
    q.block_table_stride = int32_t(MB);
    q.block_size = block_size_;
    q.row_begin = g.d_row_begin.view();
    q.pos_begin = g.d_pos_begin.view();
    q.state_slot = g.d_slots.view();
    q.block_table = g.d_table.view().reshape({n, MB});
    q.host_row_begin = g.row_begin.data();
    q.host_block_table = g.table.data();
    g.spans.resize(spans_.size());
    for (Spans& sp : g.spans) {
        sp.d_table_row = i32(T);
        sp.d_begin = i32(T);
        sp.d_end = i32(T);
        ops::SpanBatch& s = sp.batch;
        s.num_rows = T;
        s.num_table_rows = n;
        s.block_table_stride = int32_t(MB);
        s.block_size = block_size_;
        s.block_table = q.block_table;
        s.host_block_table = g.table.data();
        s.table_row = sp.d_table_row.view();
        s.key_begin = sp.d_begin.view();
        s.key_end = sp.d_end.view();
    }
    for (int kind : layer_kind_) g.layer_spans.push_back(&g.spans[size_t(kind)].batch);
    const int64_t k = c.v2 ? c.selector_top_k : 1;
    g.out = Tensor::empty(a, ctx_.dtype, {T, H});
    g.picked = Tensor::empty(a, ctx_.dtype, {M, H});
    g.lse = Tensor::empty(a, DType::F32, {M});
    g.ids = Tensor::empty(a, DType::I32, {M, k});
    g.values = Tensor::empty(a, DType::F32, {M, k});
    if (c.v2) {
        g.g = Tensor::empty(a, ctx_.dtype, {M, c.selector_rank});
        g.path = Tensor::empty(a, DType::I32, {n, K});
        g.q = Tensor::empty(a, DType::F32, {n, K, k});
    }
    return g;
}

void DFlashDrafter::fill_graph_slot(GraphSlot& g, const std::vector<Sequence*>& seqs) {
    const model::DFlashConfig& c = drafter_.config();
    const int32_t n = g.n, K = g.k;
    const int64_t MB = graph_layout_.max_blocks_per_seq;
    g.tokens.clear();
    g.positions.clear();
    g.pos_begin.clear();
    g.slots.clear();
    g.anchors.clear();
    std::fill(g.table.begin(), g.table.end(), 0);
    for (int32_t j = 0; j < n; ++j) { // block j: [anchor, MASK x K] at cached .. cached + K
        const Sequence& s = *seqs[size_t(j)];
        g.tokens.push_back(s.tokens.back());
        g.tokens.insert(g.tokens.end(), size_t(K), c.mask_token_id);
        for (int32_t i = 0; i <= K; ++i) g.positions.push_back(int32_t(s.cached + i));
        g.pos_begin.push_back(int32_t(s.cached));
        g.slots.push_back(s.slot);
        g.anchors.push_back(s.tokens.back());
        std::copy(s.blocks.begin(), s.blocks.end(), g.table.begin() + j * MB);
    }
    auto put = [&](std::vector<int32_t>& v, const Tensor& t) {
        ops::upload(ctx_,
                    TensorView::contiguous(v.data(), DType::I32, Device::cpu(),
                                           {int64_t(v.size())}),
                    t.view().narrow(0, 0, int64_t(v.size())));
    };
    put(g.tokens, g.d_tokens);
    put(g.positions, g.d_positions);
    put(g.pos_begin, g.d_pos_begin);
    put(g.slots, g.d_slots);
    put(g.anchors, g.d_anchors);
    put(g.table, g.d_table);
    for (size_t kind = 0; kind < g.spans.size(); ++kind) {
        Spans& sp = g.spans[kind];
        span_rows(kind_first_layer_[kind], seqs, sp.table_row, sp.begin, sp.end);
        put(sp.table_row, sp.d_table_row);
        put(sp.begin, sp.d_begin);
        put(sp.end, sp.d_end);
        sp.batch.host_table_row = sp.table_row.data();
        sp.batch.host_key_begin = sp.begin.data();
        sp.batch.host_key_end = sp.end.data();
    }
    g.blocks.seqs.host_pos_begin = g.pos_begin.data();
    g.blocks.seqs.host_state_slot = g.slots.data();
}

// What propose and choose run on the device for greedy drafts, on the slot's buffers.
void DFlashDrafter::graph_body(GraphSlot& g, const TensorView& logits) {
    const model::DFlashConfig& c = drafter_.config();
    const int64_t n = g.n, K = g.k;
    drafter_.propose(ctx_, g.blocks, g.layer_spans, cache_.views(), target_.weights(),
                     g.out.view());
    ops::embedding(ctx_, g.d_mask_rows.view(), g.out.view(), g.picked.view()); // the mask rows
    head_.project(ctx_, g.picked.view(), logits);
    ops::logprobs_top_k(ctx_, logits, head_.rows(), g.lse.view(), g.ids.view(), g.values.view());
    if (!c.v2) return;
    // Greedy walks on the log-probs (choose: they differ from the unary scores by a constant
    // per row without a multiplier or cap).
    const int64_t k = c.selector_top_k, R = c.selector_rank;
    ops::linear(ctx_, g.picked.view(), drafter_.weights().selector_proj, g.g.view());
    ops::dflash_select(ctx_, g.values.view().reshape({n, K, k}), g.ids.view().reshape({n, K, k}),
                       g.g.view().reshape({n, K, R}), drafter_.weights().predecessor,
                       drafter_.weights().successor, g.d_anchors.view(), TensorView(), 0.0f,
                       g.path.view(), g.q.view());
}

void DFlashDrafter::propose_from_graph(const std::vector<Sequence*>& seqs) {
    const model::DFlashConfig& c = drafter_.config();
    const int32_t n = int32_t(seqs.size()), K = int32_t(seqs.front()->drafts.size());
    GraphSlot& g = graph_slot(n, K);
    fill_graph_slot(g, seqs);
    const int64_t M = int64_t(n) * K;
    const TensorView logits = buffer(logits_, M, head_.rows(), DType::F32);
    // A moved drafter scratch or logits buffer leaves every captured graph stale.
    if (drafter_.scratch_generation() != seen_scratch_generation_ || logits.data != seen_logits_) {
        ++graph_generation_;
        seen_scratch_generation_ = drafter_.scratch_generation();
        seen_logits_ = logits.data;
    }
    const GraphReplay::Ran ran =
        g.replay.run(ctx_, graph_generation_, [&] { graph_body(g, logits); });
    graph_replays_ += ran != GraphReplay::Ran::Eager;
    graph_warmups_ += ran != GraphReplay::Ran::Replayed;
    std::vector<int32_t> drafts(static_cast<size_t>(M));
    const TensorView result = c.v2 ? g.path.view().reshape({M}) : g.ids.view().reshape({M});
    ops::download(ctx_, result,
                  TensorView::contiguous(drafts.data(), DType::I32, Device::cpu(), {M}));
    if (!c.v2) head_.to_global(drafts);
    for (int32_t j = 0; j < n; ++j) {
        auto& d = seqs[size_t(j)]->drafts;
        for (int32_t i = 0; i < K; ++i) d[size_t(i)] = drafts[size_t(j * K + i)];
    }
}

} // namespace ninfer::runtime
