#include "runtime/step_plan.h"

#include <algorithm>

#include "ops/memory.h"

namespace ninfer::runtime {
namespace {

// Copies a host I32 array into a device buffer that grows as needed; returns its view.
TensorView stage(const ops::ExecContext& ctx, const std::vector<int32_t>& host, Tensor& buffer,
                 std::initializer_list<int64_t> dims) {
    const int64_t n = int64_t(host.size());
    if (!buffer.defined() || buffer.numel() < n)
        buffer = Tensor::empty(ops::device_allocator(ctx.device), DType::I32,
                               {std::max<int64_t>(n, 16)});
    TensorView flat = buffer.view().narrow(0, 0, n);
    if (n > 0)
        ops::upload(ctx,
                    TensorView::contiguous(const_cast<int32_t*>(host.data()), DType::I32,
                                           Device::cpu(), {n}),
                    flat);
    return flat.reshape(dims);
}

} // namespace

int64_t StepPlan::scored_rows() const {
    int64_t n = 0;
    for (const auto& s : scored) n += s.count;
    return n;
}

int64_t StepPlan::sample_rows() const {
    int64_t n = 0;
    for (const Sequence* s : logit_seqs) n += 1 + int64_t(s->drafts.size());
    return n;
}

bool StepPlan::drafts() const {
    for (const auto& e : entries)
        if (!e.seq->drafts.empty()) return true;
    return false;
}

TensorView rows_buffer(const ops::ExecContext& ctx, Tensor& buffer, int64_t rows, int64_t cols,
                       DType dtype, int64_t min_rows) {
    if (!buffer.defined() || buffer.size(0) < rows || buffer.size(1) != cols ||
        buffer.view().dtype != dtype)
        buffer = Tensor::empty(ops::device_allocator(ctx.device), dtype,
                               {std::max(rows, min_rows), cols});
    return buffer.view().narrow(0, 0, rows);
}

TensorView hidden_view(const ops::ExecContext& ctx, StepBuffers& b, int64_t rows, int64_t hidden) {
    return rows_buffer(ctx, b.hidden, rows, hidden, ctx.dtype);
}

TensorView StepBuffers::logits_view(const ops::ExecContext& ctx, size_t rows, int64_t vocab) {
    return rows_buffer(ctx, logits, int64_t(rows), vocab, DType::F32, 8);
}

model::ForwardBatch build_rows_batch(const ops::ExecContext& ctx, const std::vector<RowSpan>& spans,
                                     const std::vector<int32_t>& logit_rows, int32_t block_size,
                                     StepBuffers& b) {
    const int32_t S = int32_t(spans.size());
    std::vector<int32_t> tokens, positions;
    bool mrope = false;
    for (const auto& sp : spans)
        mrope |= has_media_rows(sp.seq->media.get(), sp.pos_begin,
                                sp.pos_begin + int64_t(sp.tokens.size()));
    b.host_row_begin.assign(1, 0);
    b.host_pos_begin.clear();
    b.host_slots.clear();
    b.host_snapshot_rows.clear();
    bool snapshots = false;
    int32_t max_blocks = 1, max_rows = 0, max_context = 0;
    for (const auto& sp : spans) max_blocks = std::max(max_blocks, int32_t(sp.seq->blocks.size()));
    b.host_block_table.assign(size_t(S) * size_t(max_blocks), 0);
    for (int32_t s = 0; s < S; ++s) {
        const RowSpan& sp = spans[size_t(s)];
        const int64_t rows = int64_t(sp.tokens.size());
        const SequenceMedia* media = sp.seq->media.get();
        for (int64_t i = 0; i < rows; ++i) {
            tokens.push_back(sp.tokens[size_t(i)]);
            positions.push_back(rope_position(media, sp.pos_begin + i, 0));
        }
        b.host_row_begin.push_back(int32_t(tokens.size()));
        b.host_pos_begin.push_back(int32_t(sp.pos_begin));
        b.host_slots.push_back(sp.seq->slot);
        b.host_snapshot_rows.push_back(sp.snapshot_row);
        snapshots |= sp.snapshot_row >= 0;
        std::copy(sp.seq->blocks.begin(), sp.seq->blocks.end(),
                  b.host_block_table.begin() + int64_t(s) * max_blocks);
        max_rows = std::max(max_rows, int32_t(rows));
        max_context = std::max(max_context, int32_t(sp.pos_begin + rows));
    }
    model::ForwardBatch batch;
    const int64_t T = int64_t(tokens.size());
    if (mrope) { // [3, T]: every row's three axes
        b.host_mrope.assign(size_t(3 * T), 0);
        for (int32_t s = 0; s < S; ++s) {
            const RowSpan& sp = spans[size_t(s)];
            const int64_t row0 = b.host_row_begin[size_t(s)];
            for (int64_t i = 0; i < int64_t(sp.tokens.size()); ++i)
                for (int a = 0; a < 3; ++a)
                    b.host_mrope[size_t(a * T + row0 + i)] =
                        rope_position(sp.seq->media.get(), sp.pos_begin + i, a);
        }
        batch.host_mrope_positions = b.host_mrope.data();
    }
    for (int32_t s = 0; s < S; ++s) {
        const RowSpan& sp = spans[size_t(s)];
        if (!sp.media_rows || !sp.seq->media) continue;
        const int64_t first = sp.pos_begin + sp.media_shift;
        append_media_rows(*sp.seq->media, first, first + int64_t(sp.tokens.size()),
                          b.host_row_begin[size_t(s)], batch.media);
    }
    batch.tokens = stage(ctx, tokens, b.tokens, {T});
    batch.positions = stage(ctx, positions, b.positions, {T});
    batch.logit_rows = stage(ctx, logit_rows, b.logit_rows, {int64_t(logit_rows.size())});
    ops::SeqBatch& q = batch.seqs;
    q.num_seqs = S;
    q.num_rows = int32_t(T);
    q.max_rows_per_seq = max_rows;
    q.max_context = max_context;
    q.host_row_begin = b.host_row_begin.data();
    q.host_pos_begin = b.host_pos_begin.data();
    q.host_state_slot = b.host_slots.data();
    q.host_block_table = b.host_block_table.data();
    q.block_table_stride = max_blocks;
    q.block_size = block_size;
    q.row_begin = stage(ctx, b.host_row_begin, b.row_begin, {S + 1});
    q.pos_begin = stage(ctx, b.host_pos_begin, b.pos_begin, {S});
    q.state_slot = stage(ctx, b.host_slots, b.slots, {S});
    q.block_table = stage(ctx, b.host_block_table, b.block_table, {S, max_blocks});
    if (snapshots) {
        q.host_snapshot_row = b.host_snapshot_rows.data();
        q.snapshot_row = stage(ctx, b.host_snapshot_rows, b.snapshot_rows, {S});
    }
    return batch;
}

model::ForwardBatch build_forward_batch(const ops::ExecContext& ctx, const StepPlan& plan,
                                        int32_t block_size, StepBuffers& b,
                                        const VerifyRows& verify) {
    std::vector<RowSpan> spans;
    std::vector<int32_t> logit_rows, entry_begin;
    int32_t row = 0;
    for (const StepEntry& e : plan.entries) {
        entry_begin.push_back(row);
        const Sequence& seq = *e.seq;
        RowSpan sp{&seq, seq.cached, {}, -1, true};
        const int64_t own = e.own_rows();
        for (int64_t i = 0; i < own; ++i) sp.tokens.push_back(seq.tokens[size_t(seq.cached + i)]);
        sp.tokens.insert(sp.tokens.end(), seq.drafts.begin(), seq.drafts.end());
        if (!seq.drafts.empty()) sp.snapshot_row = verify.base + e.verify_group * verify.per_group;
        if (seq.cached + own == int64_t(seq.tokens.size())) // samples: its last 1 + drafts rows
            for (int64_t i = own - 1; i < e.rows; ++i) logit_rows.push_back(row + int32_t(i));
        row += int32_t(e.rows);
        spans.push_back(std::move(sp));
    }
    for (const auto& sc : plan.scored)
        for (int64_t i = 0; i < sc.count; ++i)
            logit_rows.push_back(entry_begin[sc.entry] + int32_t(i));
    return build_rows_batch(ctx, spans, logit_rows, block_size, b);
}

} // namespace ninfer::runtime
