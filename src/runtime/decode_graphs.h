// DecodeGraphs: CUDA-graph replay of decode and verification steps. A step whose entries all
// run W rows (W = 1: one decode token per sequence; W = 1 + K: an anchor and K drafts that are
// verified, each entry writing its per-column GDN states to its verification rows) runs the
// model through a graph captured for (B, W), B >= S the batch bucket (1, 2, 4, 8, ..., up to the
// slot count). Its device buffers have addresses and launch shapes fixed for (B, W): block tables
// padded to the engine's longest sequence, attention sized for the engine's max context.
// Sequences S..B-1 are padding: token 0 at positions 0..W-1 in the padding state row and the
// padding KV block, which no sequence uses, without snapshots; their logits are ignored. Only the
// buffer contents change between replays. The first step of a (B, W) runs eagerly (it warms
// cuBLAS and the scratch), the second captures, later ones replay. A scratch reallocation (a
// larger prefill) invalidates every graph. All graphs share one logits and one hidden buffer
// (steps run one at a time and their outputs are read before the next).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "model/qwen3_5.h"
#include "ops/memory.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

// The life of one captured graph: the first run is eager (it warms cuBLAS and the scratch), the
// second captures, later ones replay; a scratch reallocation (another generation) starts over.
struct GraphReplay {
    std::unique_ptr<ops::Graph> graph;
    bool warmed = false;
    int64_t generation = -1;
    enum class Ran { Eager, Captured, Replayed };
    // Runs body as described; says how (Captured and Replayed both launch the graph).
    Ran run(const ops::ExecContext& ctx, int64_t scratch_generation,
            const std::function<void()>& body);
    // Runs body until the graph is captured (the warm-up run and the capture), so that the
    // first real run replays.
    void warm(const ops::ExecContext& ctx, int64_t scratch_generation,
              const std::function<void()>& body);
};

// A graph class's run counts: graph launches (captures and replays, not the eager runs) and
// warm-ups (the eager first runs and the captures: they time nothing a later step costs).
struct GraphRuns {
    int64_t replays = 0, warmups = 0;
    GraphReplay::Ran count(GraphReplay::Ran ran) {
        replays += ran != GraphReplay::Ran::Eager;
        warmups += ran != GraphReplay::Ran::Replayed;
        return ran;
    }
};

// One int32 argument array of a captured graph: host values, which a step fills and the ops'
// argument checks read through raw pointers (take them after the vector's last resize), and a
// device buffer whose address stays fixed for the graph's life.
struct GraphArg {
    std::vector<int32_t> host;
    Tensor device;
    void allocate(const ops::ExecContext& ctx, int64_t n); // device buffer of max(n, 1) values
    // host -> the first host.size() values (nothing when host is empty).
    void upload(const ops::ExecContext& ctx);
    TensorView view() const;          // the whole device buffer
    TensorView view(int64_t n) const; // its first n values
};

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
        // Non-empty: the hidden buffer [rows, hidden_size = n * H] takes the residual stream
        // after these layers instead (ForwardBatch::features; a DFlash drafter's context).
        std::vector<int32_t> feature_layers;
        VerifyRows verify;         // verification state rows (per_group 0: no verify graphs)
    };
    // Verification graphs cover B * W <= this many rows: beyond it a step is long enough that
    // eager launches cost little next to it, and the shared logits buffer stays <= 64 MB.
    static constexpr int32_t kMaxVerifyRows = 64;

    DecodeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model, const Layout& layout);
    ~DecodeGraphs();

    // The bucket a step of `seqs` sequences runs in: the smallest power of two >= seqs.
    static int32_t bucket_for(int32_t seqs);
    // The bounds that the shapes of every graph class share: bucket <= the largest bucket of
    // max_seqs, bucket * W <= the class's capacity rows, and <= kMaxVerifyRows rows when W > 1.
    static bool within_bounds(int32_t bucket, int32_t W, int32_t max_seqs, int64_t capacity_rows);
    // The rows each entry of the plan runs when the plan can replay a graph, else 0: every entry
    // runs the same rows W and samples from all of them, W = 1 (decode) or W = 1 + drafts
    // (verification), and the model can capture a forward of bucket * W rows.
    int32_t graph_width(const StepPlan& plan) const;
    // Runs the step's forward (graph_width(plan) > 0); returns the logits [S * W, V] F32 (valid
    // until the next call).
    TensorView run(const StepPlan& plan, const model::CacheViews& caches);
    // Captures the graph of (bucket, W) ahead of its first step (engine start-up), its rows all
    // padding; false where no step of that shape would replay a graph.
    bool warm(int32_t bucket, int32_t W, const model::CacheViews& caches);
    // With layout.hidden_size: the last run's hidden states [S * W, H] (valid until the next
    // call).
    TensorView hidden(int64_t rows) const;
    int64_t replays() const { return runs_.replays; } // graph launches so far (not eager runs)
    // Whether the last run() replayed a graph (false: it ran eagerly to warm up, or captured):
    // only replayed steps time what the step costs from then on.
    bool last_replayed() const { return last_replayed_; }
    int64_t verify_replays() const { return verify_replays_; } // of those, with W > 1
    int64_t warmups() const { return runs_.warmups; } // runs that warmed up eagerly or captured

private:
    struct Slot; // the buffers and graph of one (bucket, width)
    Slot& slot_for(int32_t seqs, int32_t width);
    void fill(Slot& slot, const StepPlan& plan);
    bool shape_replays(int32_t bucket, int32_t W) const; // graph_width's bounds for a shape

    ops::ExecContext ctx_;
    model::Qwen35Model& model_;
    Layout layout_;
    Tensor logits_, hidden_; // [capacity rows, V] F32 and [capacity rows, H]: shared by all slots
    int64_t capacity_rows_ = 0;
    std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Slot>> slots_;
    GraphRuns runs_;
    int64_t verify_replays_ = 0;
    bool last_replayed_ = false;
};

} // namespace ninfer::runtime
