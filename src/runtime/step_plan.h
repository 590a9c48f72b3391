// One engine step as the scheduler plans it: which rows of which sequences run, and the
// ForwardBatch that describes them to the model.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"
#include "runtime/sequence.h"

namespace ninfer::runtime {

struct StepEntry {
    Sequence* seq = nullptr;
    // Rows [seq->cached, seq->cached + rows) run this step: the sequence's uncommitted tokens,
    // then its seq->drafts (verification: rows = 1 + drafts).
    int64_t rows = 0;
    int32_t verify_group = -1; // with drafts: the group of verification state rows it writes
    int64_t committed = 0;     // set after the forward: leading rows that stay (rows unless
                               // drafts were rejected)

    // Rows of the sequence's own (committed) tokens: rows without the drafts.
    int64_t own_rows() const { return rows - int64_t(seq->drafts.size()); }
    // A generation step: one row of the last generated token (and any drafts after it).
    bool generates() const { return own_rows() == 1 && seq->cached >= seq->prompt_length(); }
};

// Prompt rows whose logits score the next prompt token (requests with prompt_logprobs): the
// first `count` rows of entries[entry], i.e. positions [cached, cached + count).
struct ScoreEntry {
    size_t entry = 0;
    int64_t count = 0;
};

struct StepPlan {
    std::vector<StepEntry> entries;
    std::vector<Sequence*> logit_seqs; // sequences whose last row ends their tokens: they sample
    std::vector<ScoreEntry> scored;    // their logit rows follow the logit_seqs' rows
    int64_t scored_rows() const;
    // Logit rows of the sampling sequences: 1 + drafts each, in logit_seqs order.
    int64_t sample_rows() const;
    bool drafts() const; // some entry verifies drafts
};

// Device buffers reused from step to step.
struct StepBuffers {
    Tensor tokens, positions, row_begin, pos_begin, slots, block_table, logit_rows, logits;
    Tensor snapshot_rows, hidden;
    std::vector<int32_t> host_row_begin, host_pos_begin, host_slots, host_block_table,
        host_snapshot_rows, host_mrope;
    TensorView logits_view(const ops::ExecContext& ctx, size_t rows, int64_t vocab);
};

// verify_rows: the first verification state row and the rows per group (entries with drafts
// write their per-column GDN states to group * per_group + base).
struct VerifyRows {
    int32_t base = 0;
    int32_t per_group = 0;
};

// One sequence's rows of a ForwardBatch built from explicit tokens: tokens at positions
// pos_begin.., over seq's slot and KV blocks; snapshot_row >= 0 asks for per-row GDN states.
struct RowSpan {
    const Sequence* seq = nullptr;
    int64_t pos_begin = 0;
    std::vector<int32_t> tokens;
    int32_t snapshot_row = -1;
    // The rows' media placeholders take the vision tower's embeddings: row i takes the one of
    // token pos_begin + i + media_shift (the MTP drafter's rows embed the next token: shift 1).
    bool media_rows = true;
    int64_t media_shift = 0;
};
model::ForwardBatch build_rows_batch(const ops::ExecContext& ctx, const std::vector<RowSpan>& spans,
                                     const std::vector<int32_t>& logit_rows, int32_t block_size,
                                     StepBuffers& buffers);

model::ForwardBatch build_forward_batch(const ops::ExecContext& ctx, const StepPlan& plan,
                                        int32_t block_size, StepBuffers& buffers,
                                        const VerifyRows& verify = {});
// The first `rows` rows of a [capacity, cols] device buffer of dtype, reallocated (to at least
// min_rows rows) when it is too small or of another width or dtype; grown, never shrunk.
TensorView rows_buffer(const ops::ExecContext& ctx, Tensor& buffer, int64_t rows, int64_t cols,
                       DType dtype, int64_t min_rows = 16);
// The step's [T, hidden] buffer for the model's final-normed hidden states.
TensorView hidden_view(const ops::ExecContext& ctx, StepBuffers& buffers, int64_t rows,
                       int64_t hidden);

} // namespace ninfer::runtime
