// DecodeGraphs: CUDA-graph replay of decode steps. A step whose rows are all decode rows (one
// token per sequence) runs the model through a graph captured for a batch bucket B >= S (1, 2,
// 4, 8, ..., up to the slot count), over device buffers whose addresses and launch shapes are
// fixed for that B (block tables padded to the engine's longest sequence, attention sized for
// the engine's max context). Rows S..B-1 are padding: token 0 at position 0 in the padding
// state row and the padding KV block, which no sequence uses; their logits are ignored. Only the
// buffer contents change between replays. The first step of a bucket runs eagerly (it warms
// cuBLAS and the scratch), the second captures, later ones replay. A scratch reallocation (a
// larger prefill) invalidates every graph.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "model/qwen3_5.h"
#include "ops/memory.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

class DecodeGraphs {
public:
    struct Layout {
        int32_t block_size = 16;
        int32_t max_blocks_per_seq = 1;
        int32_t max_context = 1;
        int32_t max_seqs = 1;      // the largest bucket covers this many sequences
        int32_t padding_row = 0;   // state row of padding sequences
        int32_t padding_block = 0; // KV block of padding sequences
        int64_t hidden_size = 0;   // > 0: also write every row's final-normed hidden state
    };
    DecodeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model, const Layout& layout);

    // The bucket a step of `seqs` decode rows runs in: the smallest power of two >= seqs,
    // capped at the bucket of max_seqs (which is max_seqs rounded up to a power of two).
    static int32_t bucket_for(int32_t seqs);
    ~DecodeGraphs();

    // The plan is all decode rows and the model can capture a forward of that many rows.
    bool eligible(const StepPlan& plan) const;
    // Runs the step's forward; returns the logits [S, V] F32 (valid until the next call).
    TensorView run(const StepPlan& plan, const model::CacheViews& caches);
    // With layout.hidden_size: the last run's hidden states [S, H] (valid until the next call).
    TensorView hidden(int32_t seqs) const;

private:
    struct Slot; // the buffers and graph of one sequence count
    Slot& slot_for(int32_t seqs);
    void fill(Slot& slot, const StepPlan& plan);

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    Layout layout_;
    std::map<int32_t, std::unique_ptr<Slot>> slots_;
    const Slot* last_ = nullptr;
};

} // namespace ninfer::runtime
