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

TensorView StepBuffers::logits_view(const ops::ExecContext& ctx, size_t rows, int64_t vocab) {
    const int64_t r = int64_t(rows);
    if (!logits.defined() || logits.size(0) < r)
        logits = Tensor::empty(ops::device_allocator(ctx.device), DType::F32,
                               {std::max<int64_t>(r, 8), vocab});
    return logits.view().narrow(0, 0, r);
}

model::ForwardBatch build_forward_batch(const ops::ExecContext& ctx, const StepPlan& plan,
                                        int32_t block_size, StepBuffers& b) {
    const int32_t S = int32_t(plan.entries.size());
    std::vector<int32_t> tokens, positions, logit_rows;
    b.host_row_begin.assign(1, 0);
    b.host_pos_begin.clear();
    b.host_slots.clear();
    int32_t max_blocks = 1, max_rows = 0, max_context = 0;
    for (const auto& e : plan.entries)
        max_blocks = std::max(max_blocks, int32_t(e.seq->blocks.size()));
    b.host_block_table.assign(size_t(S) * size_t(max_blocks), 0);
    for (int32_t s = 0; s < S; ++s) {
        const StepEntry& e = plan.entries[size_t(s)];
        const Sequence& seq = *e.seq;
        for (int64_t i = 0; i < e.rows; ++i) {
            tokens.push_back(seq.tokens[size_t(seq.cached + i)]);
            positions.push_back(int32_t(seq.cached + i));
        }
        b.host_row_begin.push_back(int32_t(tokens.size()));
        b.host_pos_begin.push_back(int32_t(seq.cached));
        b.host_slots.push_back(seq.slot);
        std::copy(seq.blocks.begin(), seq.blocks.end(),
                  b.host_block_table.begin() + int64_t(s) * max_blocks);
        if (seq.cached + e.rows == int64_t(seq.tokens.size()))
            logit_rows.push_back(int32_t(tokens.size()) - 1);
        max_rows = std::max(max_rows, int32_t(e.rows));
        max_context = std::max(max_context, int32_t(seq.cached + e.rows));
    }
    for (const auto& sc : plan.scored)
        for (int64_t i = 0; i < sc.count; ++i)
            logit_rows.push_back(b.host_row_begin[sc.entry] + int32_t(i));
    model::ForwardBatch batch;
    const int64_t T = int64_t(tokens.size());
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
    return batch;
}

} // namespace ninfer::runtime
