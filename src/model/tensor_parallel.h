// Tensor parallelism (`--tensor-parallel N`, Megatron's layout): every rank holds 1/N of each
// layer's heads and rows and runs the whole forward over its share, in its own thread, with two
// all-reduces a layer (ops/collective.h) and a vocabulary-split head.
//
// Which rank holds what (rank r of N; rank_range splits a count into N contiguous runs):
//   - attention: query heads rank_range(nH) with their gates, and the KV heads they read,
//     shared_heads(nKV): nKV / N each, or, when ranks outnumber KV heads, the one KV head of the
//     rank's query group (copied on N / nKV ranks). o_proj: the matching input columns;
//   - GDN: value heads rank_range(Hv) with their z, a, b, A_log, dt_bias, conv channels and
//     recurrent state, and the key heads they read, shared_heads(Hk) (as for KV). out_proj: the
//     matching input columns;
//   - dense MLP, each routed expert and the shared expert: intermediate rows rank_range(I) of
//     gate and up, the matching columns of down (vLLM's default for MoE under TP);
//   - or, with expert parallelism (`--expert-parallel`), the routed experts rank_range(E) whole
//     (the shared expert still by rows). Every rank holds every token (the residual is whole),
//     so the dispatch is the route itself: a rank runs the pairs routed to its experts and skips
//     the others (ops/moe.h's held experts), and the layer's all-reduce is the combine. Whole
//     experts keep fp8 scale blocks intact at any N and run larger per-expert GEMMs;
//   - copied on every rank: the embedding, every norm, the router and shared-expert gate;
//   - the head: vocabulary rows rank_range(V); the logits are gathered on rank 0;
//   - the MTP module's decoder layers as the others, its fc and norms copied;
//   - rank 0 alone: the vision tower, and (for a drafter's proposal head) a whole copy of the
//     head when asked for.
// Each rank's model is an ordinary Qwen35Model of shard_config's shapes, so every op, kernel and
// cache layout is the single-device one; the residual stream is whole on every rank. A
// projection into the residual (o_proj, out_proj, down / the MoE) adds its partial product on
// rank 0 and writes it alone elsewhere; the all-reduce then leaves x + sum of the parts on every
// rank.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "io/hf_config.h"
#include "model/weights.h"
#include "ops/collective.h"
#include "ops/exec_context.h"

namespace ninfer::model {

struct TensorShard {
    int rank = 0;
    int ranks = 1;
    std::shared_ptr<ops::Collective> collective; // set when ranks > 1
    bool active() const { return ranks > 1; }
};

struct RankRange {
    int64_t begin = 0, count = 0;
};
// Rank r's run of `total` items split in N contiguous runs (floor boundaries, sizes differ by 1
// at most).
RankRange rank_range(int64_t total, int rank, int ranks);
// Rank r's shared heads (KV heads, GDN key heads) when its query (value) heads are
// rank_range(total_query) and query head q reads shared head q / (total_query / shared):
// shared / N each, or one, copied, when N > shared (N a multiple of shared).
RankRange shared_heads(int64_t shared, int rank, int ranks);

// How the model is split: N ranks, and whether the routed experts go whole to one rank each
// (expert parallelism) rather than every expert by rows over all ranks.
struct ParallelLayout {
    int ranks = 1;
    bool expert_parallel = false;
};

// The shapes rank r of the layout computes with: heads and intermediate sizes divided, or under
// expert parallelism its run of experts (vocabulary and hidden size unchanged; the head's rows
// are cut in shard_weights). Errors name the count that does not divide.
io::ModelConfig shard_config(const io::ModelConfig& full, ParallelLayout layout, int rank = 0);

// Rank r's weights, on ctx's device, cut from a whole model's dense weights on the host
// (quantized weights stay quantized where a rank's runs line up with their scales:
// model/weight_cut.h). The vision tower goes to rank 0 alone.
ModelWeights shard_weights(const io::ModelConfig& full, const ModelWeights& host, int rank,
                           ParallelLayout layout, const ops::ExecContext& ctx);
// Rank r's share of one decoder layer (the model's or the MTP module's), as shard_weights cuts it.
LayerWeights shard_layer(const io::ModelConfig& full, const LayerWeights& host, int rank,
                         ParallelLayout layout, const ops::ExecContext& ctx);

// Rank r's vocabulary rows of a head [V, H] already on ctx's device (random models, made per
// rank at their shard's shapes).
Tensor shard_head(const ops::ExecContext& ctx, const Tensor& head, int rank, int ranks);

// One worker thread for each rank after the first. run(fn) calls fn(0) on the calling thread
// and fn(r) on worker r, and returns when every call has; the first exception (another rank's
// "abandoned" only when none is more telling) is rethrown after the collective's abort() has
// freed the others and reset() has made it usable again.
class RankThreads {
public:
    RankThreads(int ranks, std::shared_ptr<ops::Collective> collective);
    ~RankThreads();
    RankThreads(const RankThreads&) = delete;
    RankThreads& operator=(const RankThreads&) = delete;

    void run(const std::function<void(int rank)>& fn);

private:
    struct Worker;
    void work(Worker& w, int rank);

    std::shared_ptr<ops::Collective> collective_;
    std::vector<std::unique_ptr<Worker>> workers_;
};

} // namespace ninfer::model
