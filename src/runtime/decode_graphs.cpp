#include "runtime/decode_graphs.h"

#include <algorithm>

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

struct DecodeGraphs::Slot {
    int32_t seqs = 0, width = 1; // bucket S and rows per sequence W
    // tokens, positions and logit rows [S * W], row_begin [S + 1], pos_begin, slots and
    // (W > 1) snapshots [S], block table [S, max_blocks].
    GraphArg tokens, positions, row_begin, pos_begin, slots, table, rows, snapshots;
    model::ForwardBatch batch;
    GraphReplay replay;
};

GraphReplay::Ran GraphReplay::run(const ops::ExecContext& ctx, int64_t scratch_generation,
                                  const std::function<void()>& body) {
    if (generation != scratch_generation) { // new size, or the scratch moved
        graph.reset();
        warmed = false;
    }
    if (!warmed) {
        body();
        warmed = true;
        generation = scratch_generation;
        return Ran::Eager;
    }
    const Ran ran = graph ? Ran::Replayed : Ran::Captured;
    if (!graph) graph = ops::capture_graph(ctx, body);
    graph->launch(ctx);
    return ran;
}

void GraphReplay::warm(const ops::ExecContext& ctx, int64_t scratch_generation,
                       const std::function<void()>& body) {
    while (!graph || generation != scratch_generation) run(ctx, scratch_generation, body);
}

void GraphArg::allocate(const ops::ExecContext& ctx, int64_t n) {
    device = Tensor::empty(ops::device_allocator(ctx.device), DType::I32,
                           {std::max<int64_t>(n, 1)});
}

void GraphArg::upload(const ops::ExecContext& ctx) {
    if (host.empty()) return; // nothing to copy (ProposeGraphs' chain positions for K = 1)
    const int64_t n = int64_t(host.size());
    ops::upload(ctx, TensorView::contiguous(host.data(), DType::I32, Device::cpu(), {n}),
                view(n));
}

TensorView GraphArg::view() const { return device.view(); }

TensorView GraphArg::view(int64_t n) const { return device.view().narrow(0, 0, n); }

DecodeGraphs::DecodeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                           const Layout& layout)
    : ctx_(ctx), model_(model), layout_(layout) {
    capacity_rows_ = bucket_for(layout.max_seqs);
    if (layout.verify.per_group > 0)
        capacity_rows_ = std::max<int64_t>(capacity_rows_, kMaxVerifyRows);
    Allocator& a = ops::device_allocator(ctx.device);
    logits_ = Tensor::empty(a, DType::F32, {capacity_rows_, model.config().vocab_size});
    if (layout.hidden_size > 0)
        hidden_ = Tensor::empty(a, ctx.dtype, {capacity_rows_, layout.hidden_size});
}

int32_t DecodeGraphs::bucket_for(int32_t seqs) {
    int32_t b = 1;
    while (b < seqs) b *= 2;
    return b;
}

DecodeGraphs::~DecodeGraphs() = default;

int32_t DecodeGraphs::graph_width(const StepPlan& plan) const {
    const int32_t S = int32_t(plan.entries.size());
    if (S == 0 || plan.logit_seqs.size() != plan.entries.size() || S > layout_.max_seqs ||
        !plan.scored.empty())
        return 0;
    const int32_t W = int32_t(plan.entries.front().rows);
    for (const auto& e : plan.entries) {
        if (e.rows != W || int32_t(e.seq->blocks.size()) > layout_.max_blocks_per_seq) return 0;
        // W > 1: an anchor and its drafts, whose per-column states go to the verify rows.
        if (W > 1 && (e.own_rows() != 1 || e.verify_group < 0)) return 0;
    }
    return shape_replays(bucket_for(S), W) ? W : 0;
}

bool DecodeGraphs::within_bounds(int32_t bucket, int32_t W, int32_t max_seqs,
                                 int64_t capacity_rows) {
    const int64_t rows = int64_t(bucket) * W;
    return W >= 1 && bucket >= 1 && bucket <= bucket_for(max_seqs) && rows <= capacity_rows &&
           (W == 1 || rows <= kMaxVerifyRows);
}

bool DecodeGraphs::shape_replays(int32_t bucket, int32_t W) const {
    // W > 1 also needs verification rows for its W - 1 drafted columns.
    return within_bounds(bucket, W, layout_.max_seqs, capacity_rows_) &&
           W - 1 <= layout_.verify.per_group && model_.capturable(ctx_, int64_t(bucket) * W);
}

bool DecodeGraphs::warm(int32_t bucket, int32_t W, const model::CacheViews& caches) {
    if (bucket != bucket_for(bucket) || !shape_replays(bucket, W)) return false;
    Slot& s = slot_for(bucket, W);
    fill(s, StepPlan{}); // every row padding
    const TensorView logits = logits_.view().narrow(0, 0, int64_t(bucket) * W);
    s.replay.warm(ctx_, model_.scratch_generation(),
                  [&] { model_.forward(ctx_, s.batch, caches, logits); });
    return true;
}

DecodeGraphs::Slot& DecodeGraphs::slot_for(int32_t S, int32_t W) {
    auto& slot = slots_[{S, W}];
    if (slot) return *slot;
    slot = std::make_unique<Slot>();
    Slot& s = *slot;
    s.seqs = S;
    s.width = W;
    const int32_t T = S * W; // rows: sequence i owns rows [i * W, (i + 1) * W)
    s.tokens.allocate(ctx_, T);
    s.positions.allocate(ctx_, T);
    s.row_begin.allocate(ctx_, S + 1);
    s.pos_begin.allocate(ctx_, S);
    s.slots.allocate(ctx_, S);
    s.table.allocate(ctx_, int64_t(S) * layout_.max_blocks_per_seq);
    s.rows.allocate(ctx_, T);
    if (hidden_.defined() && !layout_.feature_layers.empty()) {
        s.batch.features = hidden_.view().narrow(0, 0, T);
        s.batch.feature_layers = layout_.feature_layers;
    } else if (hidden_.defined()) {
        s.batch.hidden_out = hidden_.view().narrow(0, 0, T);
    }
    s.table.host.assign(size_t(S) * size_t(layout_.max_blocks_per_seq), 0);
    s.row_begin.host.resize(size_t(S) + 1);
    s.rows.host.resize(size_t(T));
    for (int32_t i = 0; i <= S; ++i) s.row_begin.host[size_t(i)] = i * W;
    for (int32_t i = 0; i < T; ++i) s.rows.host[size_t(i)] = i; // every row samples
    // Launch shapes fixed for (S, W): W rows per sequence, the engine's context bounds.
    ops::SeqBatch& q = s.batch.seqs;
    q.num_seqs = S;
    q.num_rows = T;
    q.max_rows_per_seq = W;
    q.max_context = layout_.max_context;
    q.block_table_stride = layout_.max_blocks_per_seq;
    q.block_size = layout_.block_size;
    q.row_begin = s.row_begin.view();
    q.pos_begin = s.pos_begin.view();
    q.state_slot = s.slots.view();
    q.block_table = s.table.view().reshape({S, layout_.max_blocks_per_seq});
    if (W > 1) { // per-column GDN states into each entry's verification rows
        s.snapshots.allocate(ctx_, S);
        q.snapshot_row = s.snapshots.view();
        s.snapshots.host.assign(size_t(S), -1);
        q.host_snapshot_row = s.snapshots.host.data();
    }
    s.batch.tokens = s.tokens.view();
    s.batch.positions = s.positions.view();
    s.batch.logit_rows = s.rows.view();
    s.row_begin.upload(ctx_);
    s.rows.upload(ctx_);
    return s;
}

void DecodeGraphs::fill(Slot& s, const StepPlan& plan) {
    const int32_t S = s.seqs, W = s.width;
    s.tokens.host.clear();
    s.positions.host.clear();
    s.pos_begin.host.clear();
    s.slots.host.clear();
    std::fill(s.table.host.begin(), s.table.host.end(), 0);
    const int32_t live = int32_t(plan.entries.size());
    for (int32_t i = 0; i < S; ++i) {
        const int64_t row = int64_t(i) * layout_.max_blocks_per_seq;
        if (i >= live) { // padding: its own state row and KV block, no snapshots
            for (int32_t j = 0; j < W; ++j) {
                s.tokens.host.push_back(0);
                s.positions.host.push_back(j);
            }
            s.pos_begin.host.push_back(0);
            s.slots.host.push_back(layout_.padding_row);
            s.table.host[size_t(row)] = layout_.padding_block;
            if (W > 1) s.snapshots.host[size_t(i)] = -1;
            continue;
        }
        const StepEntry& e = plan.entries[size_t(i)];
        const Sequence& seq = *e.seq;
        // The anchor, then its W - 1 drafts.
        s.tokens.host.push_back(seq.tokens[size_t(seq.cached)]);
        s.tokens.host.insert(s.tokens.host.end(), seq.drafts.begin(), seq.drafts.end());
        for (int32_t j = 0; j < W; ++j)
            s.positions.host.push_back(rope_position(seq.media.get(), seq.cached + j, 0));
        s.pos_begin.host.push_back(int32_t(seq.cached));
        s.slots.host.push_back(seq.slot);
        std::copy(seq.blocks.begin(), seq.blocks.end(), s.table.host.begin() + row);
        if (W > 1)
            s.snapshots.host[size_t(i)] =
                layout_.verify.base + e.verify_group * layout_.verify.per_group;
    }
    for (GraphArg* arg : {&s.tokens, &s.positions, &s.pos_begin, &s.slots, &s.table})
        arg->upload(ctx_);
    if (W > 1) s.snapshots.upload(ctx_);
    // Host mirrors for the ops' argument checks.
    ops::SeqBatch& q = s.batch.seqs;
    q.host_row_begin = s.row_begin.host.data();
    q.host_pos_begin = s.pos_begin.host.data();
    q.host_state_slot = s.slots.host.data();
    q.host_block_table = s.table.host.data();
}

TensorView DecodeGraphs::run(const StepPlan& plan, const model::CacheViews& caches) {
    const int32_t live = int32_t(plan.entries.size());
    const int32_t W = graph_width(plan);
    require(W > 0, "DecodeGraphs::run: the step cannot replay a graph");
    Slot& s = slot_for(bucket_for(live), W);
    fill(s, plan);
    const TensorView logits = logits_.view().narrow(0, 0, int64_t(s.seqs) * W);
    const GraphReplay::Ran ran = runs_.count(s.replay.run(
        ctx_, model_.scratch_generation(), [&] { model_.forward(ctx_, s.batch, caches, logits); }));
    last_replayed_ = ran == GraphReplay::Ran::Replayed;
    verify_replays_ += W > 1 && ran != GraphReplay::Ran::Eager;
    return logits.narrow(0, 0, int64_t(live) * W);
}

TensorView DecodeGraphs::hidden(int64_t rows) const {
    return hidden_.defined() ? hidden_.view().narrow(0, 0, rows) : TensorView();
}

} // namespace ninfer::runtime
