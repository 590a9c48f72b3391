#include "runtime/speculative/observe_graphs.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

struct ObserveGraphs::Slot {
    int32_t seqs = 0, width = 1; // bucket B and rows per sequence W
    // Arguments: tokens and positions [B * W], row_begin [B + 1], pos_begin and slots [B],
    // block table [B, max_blocks].
    GraphArg tokens, positions, row_begin, pos_begin, slots, table;
    Tensor d_no_logits; // [1]: no logit rows
    Tensor hidden_in; // [B * W, H]: the target's hidden rows (padding rows stay zero)
    model::ForwardBatch batch;
    GraphReplay replay;
};

ObserveGraphs::ObserveGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                             const DecodeGraphs::Layout& layout, int32_t token_shift)
    : ctx_(ctx), model_(model), layout_(layout), token_shift_(token_shift) {
    capacity_rows_ = std::max<int64_t>(DecodeGraphs::bucket_for(layout.max_seqs),
                                       DecodeGraphs::kMaxVerifyRows);
    out_ = Tensor::empty(ops::device_allocator(ctx.device), ctx.dtype,
                         {capacity_rows_, model.config().hidden_size});
}

ObserveGraphs::~ObserveGraphs() = default;

int32_t ObserveGraphs::width(const StepPlan& plan) const {
    const int32_t S = int32_t(plan.entries.size());
    if (S == 0 || S > layout_.max_seqs) return 0;
    const int32_t W = int32_t(plan.entries.front().rows);
    for (const StepEntry& e : plan.entries) {
        const Sequence& s = *e.seq;
        // The eager alignment skips done sequences and stops at the last known token.
        if (e.rows != W || !e.generates() || s.done || s.drafter_off || s.media ||
            int32_t(s.blocks.size()) > layout_.max_blocks_per_seq ||
            int64_t(s.tokens.size()) - 1 - s.cached < e.committed)
            return 0;
    }
    return shape_replays(DecodeGraphs::bucket_for(S), W) ? W : 0;
}

bool ObserveGraphs::shape_replays(int32_t B, int32_t W) const {
    return DecodeGraphs::within_bounds(B, W, layout_.max_seqs, capacity_rows_) &&
           model_.capturable(ctx_, int64_t(B) * W);
}

bool ObserveGraphs::warm(int32_t B, int32_t W, const model::CacheViews& caches) {
    if (B != DecodeGraphs::bucket_for(B) || !shape_replays(B, W)) return false;
    Slot& s = slot_for(B, W);
    fill(s, StepPlan{}); // every row padding; hidden_in's rows are zero until a run copies
    const TensorView out = out_.view().narrow(0, 0, int64_t(B) * W);
    s.replay.warm(ctx_, model_.scratch_generation(), [&] {
        model_.mtp_forward(ctx_, s.batch, s.hidden_in.view(), caches, out, TensorView());
    });
    return true;
}

ObserveGraphs::Slot& ObserveGraphs::slot_for(int32_t B, int32_t W) {
    auto& slot = slots_[{B, W}];
    if (slot) return *slot;
    slot = std::make_unique<Slot>();
    Slot& s = *slot;
    s.seqs = B;
    s.width = W;
    const int32_t T = B * W; // sequence j owns rows [j * W, (j + 1) * W)
    const int64_t M = layout_.max_blocks_per_seq;
    Allocator& a = ops::device_allocator(ctx_.device);
    s.tokens.allocate(ctx_, T);
    s.positions.allocate(ctx_, T);
    s.row_begin.allocate(ctx_, B + 1);
    s.pos_begin.allocate(ctx_, B);
    s.slots.allocate(ctx_, B);
    s.table.allocate(ctx_, B * M);
    s.d_no_logits = Tensor::empty(a, DType::I32, {1});
    s.hidden_in = Tensor::empty(a, ctx_.dtype, {T, model_.config().hidden_size});
    ops::fill_zero(ctx_, s.hidden_in.view()); // finite padding rows
    s.row_begin.host.resize(size_t(B) + 1);
    for (int32_t j = 0; j <= B; ++j) s.row_begin.host[size_t(j)] = j * W;
    s.row_begin.upload(ctx_);
    s.table.host.assign(size_t(B * M), 0);
    // Launch shapes fixed for (B, W): W rows per sequence, the engine's context bounds.
    model::ForwardBatch& b = s.batch;
    b.tokens = s.tokens.view(T);
    b.positions = s.positions.view(T);
    b.logit_rows = s.d_no_logits.view().narrow(0, 0, 0);
    ops::SeqBatch& q = b.seqs;
    q.num_seqs = B;
    q.num_rows = T;
    q.max_rows_per_seq = W;
    q.max_context = layout_.max_context;
    q.block_table_stride = int32_t(M);
    q.block_size = layout_.block_size;
    q.row_begin = s.row_begin.view(B + 1);
    q.pos_begin = s.pos_begin.view(B);
    q.state_slot = s.slots.view(B);
    q.block_table = s.table.view(B * M).reshape({B, M});
    q.host_row_begin = s.row_begin.host.data();
    q.host_block_table = s.table.host.data();
    return s;
}

void ObserveGraphs::fill(Slot& s, const StepPlan& plan) {
    const int32_t B = s.seqs, W = s.width, live = int32_t(plan.entries.size());
    const int64_t M = layout_.max_blocks_per_seq;
    s.tokens.host.assign(size_t(B * W), 0);
    s.positions.host.resize(size_t(B * W));
    s.pos_begin.host.assign(size_t(B), 0);
    s.slots.host.assign(size_t(B), layout_.padding_row);
    std::fill(s.table.host.begin(), s.table.host.end(), 0);
    for (int32_t j = 0; j < B; ++j) {
        const size_t row0 = size_t(j) * size_t(W);
        if (j >= live) { // padding: positions 0..W-1 of the padding block
            s.table.host[size_t(j * M)] = layout_.padding_block;
            for (int32_t i = 0; i < W; ++i) s.positions.host[row0 + size_t(i)] = i;
            continue;
        }
        const StepEntry& e = plan.entries[size_t(j)];
        const Sequence& q = *e.seq;
        // Row i embeds token cached + i + 1, known for the committed rows (width() checked).
        for (int32_t i = 0; i < W; ++i) {
            s.positions.host[row0 + size_t(i)] = int32_t(q.cached + i);
            if (i < e.committed)
                s.tokens.host[row0 + size_t(i)] = q.tokens[size_t(q.cached + i + token_shift_)];
        }
        s.pos_begin.host[size_t(j)] = int32_t(q.cached);
        s.slots.host[size_t(j)] = q.slot;
        std::copy(q.blocks.begin(), q.blocks.end(), s.table.host.begin() + j * M);
    }
    for (GraphArg* arg : {&s.tokens, &s.positions, &s.pos_begin, &s.slots, &s.table})
        arg->upload(ctx_);
    s.batch.seqs.host_pos_begin = s.pos_begin.host.data();
    s.batch.seqs.host_state_slot = s.slots.host.data();
}

TensorView ObserveGraphs::run(const StepPlan& plan, const TensorView& hidden,
                              const model::CacheViews& caches) {
    const int32_t W = width(plan), live = int32_t(plan.entries.size());
    require(W > 0, "ObserveGraphs::run: the alignment cannot run from a graph");
    const int64_t rows = int64_t(live) * W;
    require(hidden.ndim == 2 && hidden.size(0) >= rows,
            "ObserveGraphs::run: hidden must have the step's ", rows, " rows, got ",
            hidden.describe());
    Slot& s = slot_for(DecodeGraphs::bucket_for(live), W);
    fill(s, plan);
    ops::copy(ctx_, hidden.narrow(0, 0, rows), s.hidden_in.view().narrow(0, 0, rows));
    const TensorView out = out_.view().narrow(0, 0, int64_t(s.seqs) * W);
    runs_.count(s.replay.run(ctx_, model_.scratch_generation(), [&] {
        model_.mtp_forward(ctx_, s.batch, s.hidden_in.view(), caches, out, TensorView());
    }));
    return out.narrow(0, 0, rows);
}

} // namespace ninfer::runtime
