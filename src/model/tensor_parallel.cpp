#include "model/tensor_parallel.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/weight_cut.h"
#include "ops/memory.h"

namespace ninfer::model {

RankRange rank_range(int64_t total, int rank, int ranks) {
    const int64_t begin = total * rank / ranks, end = total * (rank + 1) / ranks;
    return {begin, end - begin};
}

RankRange shared_heads(int64_t shared, int rank, int ranks) {
    if (shared >= ranks) return rank_range(shared, rank, ranks);
    return {int64_t(rank) * shared / ranks, 1};
}

namespace {

void require_divides(int64_t count, int ranks, const char* what) {
    require(count % ranks == 0, "--tensor-parallel ", ranks, ": ", what, " (", count,
            ") must divide into ", ranks, " equal parts");
}

// Heads read by groups of query heads: split evenly, or one copied per rank when ranks
// outnumber them (then each rank's query heads must fall in one group).
void require_shared_split(int64_t shared, int ranks, const char* what) {
    require(shared % ranks == 0 || ranks % shared == 0, "--tensor-parallel ", ranks, ": ", what,
            " (", shared, ") must divide into ", ranks, " parts, or ", ranks,
            " into a multiple of them");
}

using Parts = Runs;

Tensor copy_whole(const ops::ExecContext& ctx, const Tensor& t) {
    if (!t.defined()) return {};
    return cut_tensor(ctx, t.view(), 0, {{0, t.size(0)}});
}

Weight rows(const ops::ExecContext& ctx, const Weight& w, const Parts& parts) {
    return cut_weight(ctx, w, WeightAxis::Rows, parts);
}

Weight cols(const ops::ExecContext& ctx, const Weight& w, const Parts& parts) {
    return cut_weight(ctx, w, WeightAxis::Cols, parts);
}

Tensor rows(const ops::ExecContext& ctx, const Tensor& t, const Parts& parts) {
    if (!t.defined()) return {};
    return cut_tensor(ctx, t.view(), 0, parts);
}

RankRange scaled(RankRange r, int64_t unit, int64_t offset = 0) {
    return {offset + r.begin * unit, r.count * unit};
}

struct LayerCut {
    const io::ModelConfig& c;
    const ops::ExecContext& ctx;
    int rank, ranks;
    bool expert_parallel;

    void attention(const AttentionWeights& w, AttentionWeights& out) const {
        const int64_t D = c.head_dim, nH = c.num_heads, nKV = c.num_kv_heads;
        const RankRange q = rank_range(nH, rank, ranks), kv = shared_heads(nKV, rank, ranks);
        // rows: per query head [query | gate] (2D), then k (nKV*D), then v (nKV*D).
        out.in_proj = rows(ctx, w.in_proj,
                           {scaled(q, 2 * D), scaled(kv, D, 2 * nH * D),
                            scaled(kv, D, (2 * nH + nKV) * D)});
        out.q_norm = copy_whole(ctx, w.q_norm);
        out.k_norm = copy_whole(ctx, w.k_norm);
        out.o_proj = cols(ctx, w.o_proj, {scaled(q, D)});
    }

    void gdn(const GdnWeights& w, GdnWeights& out) const {
        const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
        const int64_t Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
        const int64_t C = c.conv_dim(), Vd = c.value_dim();
        const RankRange k = shared_heads(Hk, rank, ranks), v = rank_range(Hv, rank, ranks);
        // conv channels: q (Hk*dk) | k (Hk*dk) | v (Hv*dv).
        const Parts qkv{scaled(k, dk), scaled(k, dk, Hk * dk), scaled(v, dv, 2 * Hk * dk)};
        Parts in = qkv;
        in.push_back(scaled(v, dv, C)); // z
        if (w.in_proj_ba.defined()) {   // qkv | z, and b | a apart
            out.in_proj = rows(ctx, w.in_proj, in);
            out.in_proj_ba = rows(ctx, w.in_proj_ba, {v, scaled(v, 1, Hv)});
        } else {
            in.push_back(scaled(v, 1, C + Vd));      // b
            in.push_back(scaled(v, 1, C + Vd + Hv)); // a
            out.in_proj = rows(ctx, w.in_proj, in);
        }
        out.conv = rows(ctx, w.conv, qkv);
        out.A_log = rows(ctx, w.A_log, {v});
        out.dt_bias = rows(ctx, w.dt_bias, {v});
        out.norm = copy_whole(ctx, w.norm);
        out.out_proj = cols(ctx, w.out_proj, {scaled(v, dv)});
    }

    // gate rows then up rows of an [.., 2I, H] stack; down's matching columns.
    void swiglu(const Weight& gate_up, const Weight& down, int64_t I, Weight& gu_out,
                Weight& down_out) const {
        const RankRange i = rank_range(I, rank, ranks);
        gu_out = rows(ctx, gate_up, {i, scaled(i, 1, I)});
        down_out = cols(ctx, down, {i});
    }

    LayerWeights layer(const LayerWeights& w) const {
        LayerWeights out;
        out.kind = w.kind;
        out.input_norm = copy_whole(ctx, w.input_norm);
        out.post_norm = copy_whole(ctx, w.post_norm);
        if (w.kind == io::LayerKind::FullAttention)
            attention(w.attn, out.attn);
        else
            gdn(w.gdn, out.gdn);
        if (!c.moe) {
            swiglu(w.mlp.gate_up, w.mlp.down, c.intermediate_size, out.mlp.gate_up, out.mlp.down);
            return out;
        }
        out.mlp.router = copy_whole(ctx, w.mlp.router);
        if (expert_parallel) {
            const Parts held{rank_range(c.num_experts, rank, ranks)};
            out.mlp.experts_gate_up = cut_weight(ctx, w.mlp.experts_gate_up, WeightAxis::Experts, held);
            out.mlp.experts_down = cut_weight(ctx, w.mlp.experts_down, WeightAxis::Experts, held);
        } else {
            swiglu(w.mlp.experts_gate_up, w.mlp.experts_down, c.moe_intermediate_size,
                   out.mlp.experts_gate_up, out.mlp.experts_down);
        }
        swiglu(w.mlp.shared_gate_up, w.mlp.shared_down, c.shared_expert_intermediate_size,
               out.mlp.shared_gate_up, out.mlp.shared_down);
        return out;
    }
};

VisionWeights copy_vision(const ops::ExecContext& ctx, const VisionWeights& v) {
    VisionWeights out;
    auto copy = [&](const Tensor& t) { return copy_whole(ctx, t); };
    out.patch_w = copy(v.patch_w);
    out.patch_b = copy(v.patch_b);
    out.pos_embed = copy(v.pos_embed);
    out.merger_norm_w = copy(v.merger_norm_w);
    out.merger_norm_b = copy(v.merger_norm_b);
    out.merger_fc1_w = copy(v.merger_fc1_w);
    out.merger_fc1_b = copy(v.merger_fc1_b);
    out.merger_fc2_w = copy(v.merger_fc2_w);
    out.merger_fc2_b = copy(v.merger_fc2_b);
    for (const VisionBlockWeights& b : v.blocks)
        out.blocks.push_back({copy(b.norm1_w), copy(b.norm1_b), copy(b.norm2_w), copy(b.norm2_b),
                              copy(b.qkv_w), copy(b.qkv_b), copy(b.proj_w), copy(b.proj_b),
                              copy(b.fc1_w), copy(b.fc1_b), copy(b.fc2_w), copy(b.fc2_b)});
    return out;
}

} // namespace

io::ModelConfig shard_config(const io::ModelConfig& full, ParallelLayout layout, int rank) {
    const int ranks = layout.ranks;
    require(ranks >= 1, "--tensor-parallel needs one rank or more, got ", ranks);
    require(rank >= 0 && rank < ranks, "shard_config: rank ", rank, " of ", ranks);
    require(!layout.expert_parallel || full.moe,
            "--expert-parallel splits the routed experts of a MoE model; this model is dense");
    io::ModelConfig c = full;
    if (ranks == 1) return c;
    require_divides(full.num_heads, ranks, "num_attention_heads");
    require_shared_split(full.num_kv_heads, ranks, "num_key_value_heads");
    require_divides(full.linear_num_value_heads, ranks, "linear_num_value_heads");
    require_shared_split(full.linear_num_key_heads, ranks, "linear_num_key_heads");
    c.num_heads = full.num_heads / ranks;
    c.num_kv_heads = shared_heads(full.num_kv_heads, 0, ranks).count;
    c.linear_num_value_heads = full.linear_num_value_heads / ranks;
    c.linear_num_key_heads = shared_heads(full.linear_num_key_heads, 0, ranks).count;
    if (full.moe && layout.expert_parallel) {
        require(full.num_experts >= ranks, "--expert-parallel over ", ranks,
                " ranks: num_experts (", full.num_experts, ") gives a rank none");
        require_divides(full.shared_expert_intermediate_size, ranks,
                        "shared_expert_intermediate_size");
        const RankRange held = rank_range(full.num_experts, rank, ranks);
        c.first_held_expert = held.begin;
        c.held_expert_count = held.count;
        c.shared_expert_intermediate_size /= ranks;
    } else if (full.moe) {
        require_divides(full.moe_intermediate_size, ranks, "moe_intermediate_size");
        require_divides(full.shared_expert_intermediate_size, ranks,
                        "shared_expert_intermediate_size");
        c.moe_intermediate_size /= ranks;
        c.shared_expert_intermediate_size /= ranks;
    } else {
        require_divides(full.intermediate_size, ranks, "intermediate_size");
        c.intermediate_size /= ranks;
    }
    return c;
}

ModelWeights shard_weights(const io::ModelConfig& full, const ModelWeights& host, int rank,
                           ParallelLayout layout, const ops::ExecContext& ctx) {
    const int ranks = layout.ranks;
    require(rank >= 0 && rank < ranks, "shard_weights: rank ", rank, " of ", ranks);
    ModelWeights out;
    out.embed = copy_whole(ctx, host.embed);
    out.final_norm = copy_whole(ctx, host.final_norm);
    out.lm_head = rows(ctx, host.lm_head, {rank_range(host.lm_head.size(0), rank, ranks)});
    const LayerCut cut{full, ctx, rank, ranks, layout.expert_parallel};
    for (const LayerWeights& l : host.layers) out.layers.push_back(cut.layer(l));
    // The MTP module: its fc and norms copied, its decoder layers cut as the others.
    const MtpWeights& m = host.mtp;
    if (m.fc.defined()) out.mtp.fc = cut_weight(ctx, m.fc, WeightAxis::Rows, {{0, m.fc.size(0)}});
    out.mtp.pre_fc_norm_embedding = copy_whole(ctx, m.pre_fc_norm_embedding);
    out.mtp.pre_fc_norm_hidden = copy_whole(ctx, m.pre_fc_norm_hidden);
    out.mtp.norm = copy_whole(ctx, m.norm);
    for (const LayerWeights& l : m.layers) out.mtp.layers.push_back(cut.layer(l));
    if (rank == 0 && host.vision.loaded()) out.vision = copy_vision(ctx, host.vision);
    return out;
}

LayerWeights shard_layer(const io::ModelConfig& full, const LayerWeights& host, int rank,
                         ParallelLayout layout, const ops::ExecContext& ctx) {
    return LayerCut{full, ctx, rank, layout.ranks, layout.expert_parallel}.layer(host);
}

Tensor shard_head(const ops::ExecContext& ctx, const Tensor& head, int rank, int ranks) {
    const RankRange v = rank_range(head.size(0), rank, ranks);
    Tensor out = Tensor::empty(ops::device_allocator(ctx.device), head.view().dtype,
                               {v.count, head.size(1)});
    ops::copy(ctx, head.view().narrow(0, v.begin, v.count), out.view());
    return out;
}

// ---- RankThreads ----

struct RankThreads::Worker {
    std::mutex mutex;
    std::condition_variable wake;
    const std::function<void(int)>* job = nullptr; // set: run it; cleared when done
    bool stop = false;
    std::exception_ptr error;
    std::thread thread;
};

RankThreads::RankThreads(int ranks, std::shared_ptr<ops::Collective> collective)
    : collective_(std::move(collective)) {
    for (int r = 1; r < ranks; ++r) {
        workers_.push_back(std::make_unique<Worker>());
        Worker& w = *workers_.back();
        w.thread = std::thread([this, &w, r] { work(w, r); });
    }
}

RankThreads::~RankThreads() {
    for (auto& w : workers_) {
        {
            std::lock_guard<std::mutex> lock(w->mutex);
            w->stop = true;
        }
        w->wake.notify_all();
        w->thread.join();
    }
}

void RankThreads::work(Worker& w, int rank) {
    std::unique_lock<std::mutex> lock(w.mutex);
    for (;;) {
        w.wake.wait(lock, [&] { return w.job != nullptr || w.stop; });
        if (w.stop) return;
        const std::function<void(int)>& fn = *w.job;
        lock.unlock();
        std::exception_ptr error;
        try {
            fn(rank);
        } catch (...) {
            error = std::current_exception();
            if (collective_) collective_->abort(); // free the ranks waiting for this one
        }
        lock.lock();
        w.error = error;
        w.job = nullptr;
        w.wake.notify_all();
    }
}

void RankThreads::run(const std::function<void(int rank)>& fn) {
    for (auto& w : workers_) {
        std::lock_guard<std::mutex> lock(w->mutex);
        w->error = nullptr;
        w->job = &fn;
        w->wake.notify_all();
    }
    std::vector<std::exception_ptr> errors;
    try {
        fn(0);
    } catch (...) {
        errors.push_back(std::current_exception());
        if (collective_) collective_->abort();
    }
    for (auto& w : workers_) {
        std::unique_lock<std::mutex> lock(w->mutex);
        w->wake.wait(lock, [&] { return w->job == nullptr; });
        if (w->error) errors.push_back(w->error);
    }
    if (errors.empty()) return;
    if (collective_) collective_->reset();
    for (const std::exception_ptr& e : errors)
        if (!ops::is_abandoned(e)) std::rethrow_exception(e);
    std::rethrow_exception(errors.front());
}

} // namespace ninfer::model
