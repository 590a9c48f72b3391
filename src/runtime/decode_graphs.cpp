#include "runtime/decode_graphs.h"

#include <algorithm>

#include "ops/memory.h"

namespace ninfer::runtime {

struct DecodeGraphs::Slot {
    int32_t seqs = 0;
    std::vector<int32_t> tokens, positions, row_begin, pos_begin, slots, table, rows;
    Tensor d_tokens, d_positions, d_row_begin, d_pos_begin, d_slots, d_table, d_rows, logits, hidden;
    model::ForwardBatch batch;
    std::unique_ptr<ops::Graph> graph;
    bool warmed = false;
    int64_t generation = -1;
};

DecodeGraphs::DecodeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                           const Layout& layout)
    : ctx_(ctx), model_(model), layout_(layout) {}

int32_t DecodeGraphs::bucket_for(int32_t seqs) {
    int32_t b = 1;
    while (b < seqs) b *= 2;
    return b;
}

DecodeGraphs::~DecodeGraphs() = default;

bool DecodeGraphs::eligible(const StepPlan& plan) const {
    const int32_t S = int32_t(plan.entries.size());
    if (S == 0 || plan.logit_seqs.size() != plan.entries.size() || S > layout_.max_seqs)
        return false;
    for (const auto& e : plan.entries)
        if (e.rows != 1 || int32_t(e.seq->blocks.size()) > layout_.max_blocks_per_seq) return false;
    return model_.capturable(ctx_, bucket_for(S));
}

DecodeGraphs::Slot& DecodeGraphs::slot_for(int32_t S) {
    auto& slot = slots_[S];
    if (slot) return *slot;
    slot = std::make_unique<Slot>();
    Slot& s = *slot;
    s.seqs = S;
    Allocator& a = ops::device_allocator(ctx_.device);
    auto i32 = [&](int64_t n) { return Tensor::empty(a, DType::I32, {n}); };
    s.d_tokens = i32(S);
    s.d_positions = i32(S);
    s.d_row_begin = i32(S + 1);
    s.d_pos_begin = i32(S);
    s.d_slots = i32(S);
    s.d_table = i32(int64_t(S) * layout_.max_blocks_per_seq);
    s.d_rows = i32(S);
    s.logits = Tensor::empty(a, DType::F32, {S, model_.config().vocab_size});
    if (layout_.hidden_size > 0) {
        s.hidden = Tensor::empty(a, ctx_.dtype, {S, layout_.hidden_size});
        s.batch.hidden_out = s.hidden.view();
    }
    s.table.assign(size_t(S) * size_t(layout_.max_blocks_per_seq), 0);
    s.row_begin.resize(size_t(S) + 1);
    s.rows.resize(size_t(S));
    for (int32_t i = 0; i <= S; ++i) s.row_begin[size_t(i)] = i;
    for (int32_t i = 0; i < S; ++i) s.rows[size_t(i)] = i;
    // Launch shapes fixed for this S: one row per sequence, the engine's context bounds.
    ops::SeqBatch& q = s.batch.seqs;
    q.num_seqs = S;
    q.num_rows = S;
    q.max_rows_per_seq = 1;
    q.max_context = layout_.max_context;
    q.block_table_stride = layout_.max_blocks_per_seq;
    q.block_size = layout_.block_size;
    q.row_begin = s.d_row_begin.view();
    q.pos_begin = s.d_pos_begin.view();
    q.state_slot = s.d_slots.view();
    q.block_table = s.d_table.view().reshape({S, layout_.max_blocks_per_seq});
    s.batch.tokens = s.d_tokens.view();
    s.batch.positions = s.d_positions.view();
    s.batch.logit_rows = s.d_rows.view();
    ops::upload(ctx_,
                TensorView::contiguous(s.row_begin.data(), DType::I32, Device::cpu(), {S + 1}),
                s.d_row_begin);
    ops::upload(ctx_, TensorView::contiguous(s.rows.data(), DType::I32, Device::cpu(), {S}),
                s.d_rows);
    return s;
}

void DecodeGraphs::fill(Slot& s, const StepPlan& plan) {
    const int32_t S = s.seqs;
    s.tokens.clear();
    s.positions.clear();
    s.pos_begin.clear();
    s.slots.clear();
    std::fill(s.table.begin(), s.table.end(), 0);
    const int32_t live = int32_t(plan.entries.size());
    for (int32_t i = 0; i < S; ++i) {
        const int64_t row = int64_t(i) * layout_.max_blocks_per_seq;
        if (i >= live) { // padding: its own state row and KV block
            s.tokens.push_back(0);
            s.positions.push_back(0);
            s.pos_begin.push_back(0);
            s.slots.push_back(layout_.padding_row);
            s.table[size_t(row)] = layout_.padding_block;
            continue;
        }
        const Sequence& seq = *plan.entries[size_t(i)].seq;
        s.tokens.push_back(seq.tokens[size_t(seq.cached)]);
        s.positions.push_back(rope_position(seq.media.get(), seq.cached, 0));
        s.pos_begin.push_back(int32_t(seq.cached));
        s.slots.push_back(seq.slot);
        std::copy(seq.blocks.begin(), seq.blocks.end(), s.table.begin() + row);
    }
    auto host = [](std::vector<int32_t>& v) {
        return TensorView::contiguous(v.data(), DType::I32, Device::cpu(), {int64_t(v.size())});
    };
    ops::upload(ctx_, host(s.tokens), s.d_tokens);
    ops::upload(ctx_, host(s.positions), s.d_positions);
    ops::upload(ctx_, host(s.pos_begin), s.d_pos_begin);
    ops::upload(ctx_, host(s.slots), s.d_slots);
    ops::upload(ctx_, host(s.table), s.d_table);
    // Host mirrors for the ops' argument checks.
    ops::SeqBatch& q = s.batch.seqs;
    q.host_row_begin = s.row_begin.data();
    q.host_pos_begin = s.pos_begin.data();
    q.host_state_slot = s.slots.data();
    q.host_block_table = s.table.data();
}

TensorView DecodeGraphs::run(const StepPlan& plan, const model::CacheViews& caches) {
    const int32_t live = int32_t(plan.entries.size());
    Slot& s = slot_for(bucket_for(live));
    fill(s, plan);
    if (s.generation != model_.scratch_generation()) { // new size, or the scratch moved
        s.graph.reset();
        s.warmed = false;
    }
    auto forward = [&] { model_.forward(ctx_, s.batch, caches, s.logits); };
    if (!s.warmed) {
        forward();
        s.warmed = true;
        s.generation = model_.scratch_generation();
    } else {
        if (!s.graph) s.graph = ops::capture_graph(ctx_, forward);
        s.graph->launch(ctx_);
    }
    last_ = &s;
    return s.logits.view().narrow(0, 0, live);
}

TensorView DecodeGraphs::hidden(int32_t seqs) const {
    return last_ && last_->hidden.defined() ? last_->hidden.view().narrow(0, 0, seqs)
                                            : TensorView();
}

} // namespace ninfer::runtime
