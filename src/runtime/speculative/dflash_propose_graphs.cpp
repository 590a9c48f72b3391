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
    // A layer kind's SpanBatch and its rows [T] (the eager path's Spans, at fixed addresses).
    struct SpanArgs {
        GraphArg table_row, begin, end;
        ops::SpanBatch batch;
    };
    int32_t n = 0, k = 0; // sequences and drafts each: T = n (K + 1) block rows, M = n K
    // Arguments. Fixed for (n, K): row_begin and segments [n + 1] (= j (K + 1)), mask_rows [M].
    // Per proposal: tokens and positions [T], pos_begin, slots and anchors [n], the block table
    // [n, max_blocks], and each layer kind's span rows [T].
    GraphArg row_begin, mask_rows, tokens, positions, pos_begin, slots, anchors, table;
    std::vector<SpanArgs> spans; // one per layer kind, as the eager path's spans_
    model::DFlashBlocks blocks;
    std::vector<const ops::SpanBatch*> layer_spans;
    Tensor out, picked, lse, ids, values, g, path, q; // the body's outputs and intermediates
    GraphReplay replay;
};

void DFlashDrafter::enable_graphs(const DecodeGraphs::Layout& layout) {
    graph_layout_ = layout;
    graphs_on_ = !ctx_.device.is_cpu();
}

bool DFlashDrafter::graph_config_eligible() const {
    const model::DFlashConfig& c = drafter_.config();
    // The head's host steps (choose): DFlash2's id map, its score transform, the sabotage arm.
    return !(c.v2 && (head_.maps_ids() || c.output_multiplier != 1.0 || c.logit_softcap > 0 ||
                      swap_ranks_));
}

bool DFlashDrafter::graph_eligible(const std::vector<Sequence*>& seqs) const {
    const model::DFlashConfig& c = drafter_.config();
    const int32_t n = int32_t(seqs.size());
    const size_t K = seqs.front()->drafts.size();
    if (n < 1 || n > kGraphMaxSeqs || K < 1 || K > size_t(kGraphMaxDrafts)) return false;
    if (!graph_config_eligible()) return false;
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
    for (int32_t j = 0; j <= n; ++j) g.row_begin.host.push_back(j * W);
    for (int32_t j = 0; j < n; ++j)
        for (int32_t i = 0; i < K; ++i) g.mask_rows.host.push_back(j * W + 1 + i);
    g.row_begin.allocate(ctx_, n + 1);
    g.mask_rows.allocate(ctx_, M);
    g.row_begin.upload(ctx_);
    g.mask_rows.upload(ctx_);
    g.tokens.allocate(ctx_, T);
    g.positions.allocate(ctx_, T);
    g.pos_begin.allocate(ctx_, n);
    g.slots.allocate(ctx_, n);
    g.anchors.allocate(ctx_, n);
    g.table.allocate(ctx_, n * MB);
    g.table.host.assign(size_t(n * MB), 0);
    // The blocks as n sequences of W rows (their KV writes), launch shapes fixed for (n, K).
    model::DFlashBlocks& b = g.blocks;
    b.tokens = g.tokens.view();
    b.positions = g.positions.view();
    b.host_segments = g.row_begin.host.data();
    b.segments = g.row_begin.view();
    ops::SeqBatch& q = b.seqs;
    q.num_seqs = n;
    q.num_rows = T;
    q.max_rows_per_seq = W;
    q.max_context = graph_layout_.max_context;
    q.block_table_stride = int32_t(MB);
    q.block_size = block_size_;
    q.row_begin = g.row_begin.view();
    q.pos_begin = g.pos_begin.view();
    q.state_slot = g.slots.view();
    q.block_table = g.table.view().reshape({n, MB});
    q.host_row_begin = g.row_begin.host.data();
    q.host_block_table = g.table.host.data();
    g.spans.resize(spans_.size());
    for (GraphSlot::SpanArgs& sp : g.spans) {
        for (GraphArg* arg : {&sp.table_row, &sp.begin, &sp.end}) arg->allocate(ctx_, T);
        ops::SpanBatch& s = sp.batch;
        s.num_rows = T;
        s.num_table_rows = n;
        s.block_table_stride = int32_t(MB);
        s.block_size = block_size_;
        s.block_table = q.block_table;
        s.host_block_table = g.table.host.data();
        s.table_row = sp.table_row.view();
        s.key_begin = sp.begin.view();
        s.key_end = sp.end.view();
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
    for (GraphArg* arg : {&g.tokens, &g.positions, &g.pos_begin, &g.slots, &g.anchors})
        arg->host.clear();
    std::fill(g.table.host.begin(), g.table.host.end(), 0);
    for (int32_t j = 0; j < n; ++j) { // block j: [anchor, MASK x K] at cached .. cached + K
        const Sequence& s = *seqs[size_t(j)];
        g.tokens.host.push_back(s.tokens.back());
        g.tokens.host.insert(g.tokens.host.end(), size_t(K), c.mask_token_id);
        for (int32_t i = 0; i <= K; ++i) g.positions.host.push_back(int32_t(s.cached + i));
        g.pos_begin.host.push_back(int32_t(s.cached));
        g.slots.host.push_back(s.slot);
        g.anchors.host.push_back(s.tokens.back());
        std::copy(s.blocks.begin(), s.blocks.end(), g.table.host.begin() + j * MB);
    }
    for (GraphArg* arg : {&g.tokens, &g.positions, &g.pos_begin, &g.slots, &g.anchors, &g.table})
        arg->upload(ctx_);
    for (size_t kind = 0; kind < g.spans.size(); ++kind) {
        GraphSlot::SpanArgs& sp = g.spans[kind];
        span_rows(kind_first_layer_[kind], seqs, sp.table_row.host, sp.begin.host, sp.end.host);
        for (GraphArg* arg : {&sp.table_row, &sp.begin, &sp.end}) arg->upload(ctx_);
        // After span_rows: it refills the vectors, which may move them.
        sp.batch.host_table_row = sp.table_row.host.data();
        sp.batch.host_key_begin = sp.begin.host.data();
        sp.batch.host_key_end = sp.end.host.data();
    }
    g.blocks.seqs.host_pos_begin = g.pos_begin.host.data();
    g.blocks.seqs.host_state_slot = g.slots.host.data();
}

// What propose and choose run on the device for greedy drafts, on the slot's buffers.
void DFlashDrafter::graph_body(GraphSlot& g, const TensorView& logits) {
    const model::DFlashConfig& c = drafter_.config();
    const int64_t n = g.n, K = g.k;
    drafter_.propose(ctx_, g.blocks, g.layer_spans, cache_.views(), target_.weights(),
                     g.out.view());
    ops::embedding(ctx_, g.mask_rows.view(), g.out.view(), g.picked.view()); // the mask rows
    head_.project(ctx_, g.picked.view(), logits);
    ops::logprobs_top_k(ctx_, logits, head_.rows(), g.lse.view(), g.ids.view(), g.values.view());
    if (!c.v2) return;
    // Greedy walks on the log-probs (choose: they differ from the unary scores by a constant
    // per row without a multiplier or cap).
    const int64_t k = c.selector_top_k, R = c.selector_rank;
    ops::linear(ctx_, g.picked.view(), drafter_.weights().selector_proj, g.g.view());
    ops::dflash_select(ctx_, g.values.view().reshape({n, K, k}), g.ids.view().reshape({n, K, k}),
                       g.g.view().reshape({n, K, R}), drafter_.weights().predecessor,
                       drafter_.weights().successor, g.anchors.view(), TensorView(), 0.0f,
                       g.path.view(), g.q.view());
}

TensorView DFlashDrafter::graph_logits(int64_t M) {
    const TensorView logits = buffer(logits_, M, head_.rows(), DType::F32);
    // A moved drafter scratch or logits buffer leaves every captured graph stale.
    if (drafter_.scratch_generation() != seen_scratch_generation_ || logits.data != seen_logits_) {
        ++graph_generation_;
        seen_scratch_generation_ = drafter_.scratch_generation();
        seen_logits_ = logits.data;
    }
    return logits;
}

void DFlashDrafter::warm_graphs(int32_t bucket, int32_t rows) {
    const int32_t K = rows - 1;
    // Padding block rows sit at positions 0..K, in as many padding KV blocks as they cover.
    const int32_t blocks = (rows + block_size_ - 1) / block_size_;
    if (!graphs_on_ || K < 1 || K > kGraphMaxDrafts || !graph_config_eligible() ||
        blocks > graph_layout_.max_blocks_per_seq)
        return;
    for (int32_t n = std::min(bucket, kGraphMaxSeqs); n > bucket / 2; --n) {
        std::vector<Sequence> padding(static_cast<size_t>(n));
        std::vector<Sequence*> seqs;
        for (Sequence& s : padding) {
            s.tokens = {0};
            s.slot = graph_layout_.padding_row;
            s.blocks.assign(size_t(blocks), graph_layout_.padding_block);
            s.drafts.assign(size_t(K), 0);
            seqs.push_back(&s);
        }
        GraphSlot& g = graph_slot(n, K);
        fill_graph_slot(g, seqs);
        const TensorView logits = graph_logits(int64_t(n) * K);
        g.replay.warm(ctx_, graph_generation_, [&] { graph_body(g, logits); });
    }
}

void DFlashDrafter::propose_from_graph(const std::vector<Sequence*>& seqs) {
    const model::DFlashConfig& c = drafter_.config();
    const int32_t n = int32_t(seqs.size()), K = int32_t(seqs.front()->drafts.size());
    GraphSlot& g = graph_slot(n, K);
    fill_graph_slot(g, seqs);
    const int64_t M = int64_t(n) * K;
    const TensorView logits = graph_logits(M);
    graph_runs_.count(g.replay.run(ctx_, graph_generation_, [&] { graph_body(g, logits); }));
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
