// DecodeGraphs: CUDA-graph replay of decode steps. A step whose rows are all decode rows (one
// token per sequence) runs the model through a graph captured for its sequence count S, over
// device buffers whose addresses and launch shapes are fixed for that S (block tables padded to
// the engine's longest sequence, attention sized for the engine's max context). Only the buffer
// contents change between replays. The first step of a size runs eagerly (it warms cuBLAS and
// the scratch), the second captures, later ones replay. A scratch reallocation (a larger prefill)
// invalidates every graph.
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
    DecodeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model, int32_t block_size,
                 int32_t max_blocks_per_seq, int32_t max_context);
    ~DecodeGraphs();

    // The plan is all decode rows and the model can capture a forward of that many rows.
    bool eligible(const StepPlan& plan) const;
    // Runs the step's forward; returns the logits [S, V] F32 (valid until the next call).
    TensorView run(const StepPlan& plan, const model::CacheViews& caches);

private:
    struct Slot; // the buffers and graph of one sequence count
    Slot& slot_for(int32_t seqs);
    void fill(Slot& slot, const StepPlan& plan);

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    int32_t block_size_, max_blocks_, max_context_;
    std::map<int32_t, std::unique_ptr<Slot>> slots_;
};

} // namespace ninfer::runtime
