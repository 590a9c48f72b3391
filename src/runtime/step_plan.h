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
    int64_t rows = 0; // tokens [seq->cached, seq->cached + rows) run this step
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
};

// Device buffers reused from step to step.
struct StepBuffers {
    Tensor tokens, positions, row_begin, pos_begin, slots, block_table, logit_rows, logits;
    std::vector<int32_t> host_row_begin, host_pos_begin, host_slots, host_block_table;
    TensorView logits_view(const ops::ExecContext& ctx, size_t rows, int64_t vocab);
};

model::ForwardBatch build_forward_batch(const ops::ExecContext& ctx, const StepPlan& plan,
                                        int32_t block_size, StepBuffers& buffers);

} // namespace ninfer::runtime
