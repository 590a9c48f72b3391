// Qwen35Model under tensor parallelism (model/tensor_parallel.h): the rank models, their threads,
// and the forward that runs every rank over one batch.
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/qwen3_5.h"
#include "model/weight_cut.h"
#include "ops/memory.h"

namespace ninfer::model {

// Rank r >= 1: its context, its model, and its device's copies of each batch's index tensors.
struct Qwen35Model::Peers {
    struct Rank {
        ops::ExecContext ctx;
        std::unique_ptr<Qwen35Model> model;
        std::vector<std::pair<Buffer, int64_t>> buffers; // mirror slots (allocation, bytes)
        Buffer draft_out; // the MTP's draft hidden rows this rank computes (rank 0's are kept)
        int64_t draft_bytes = 0;

        // The batch as this rank reads it: the same host arrays; device views copied to this
        // rank's device when it is another one; no hidden-state or feature outputs (rank 0's).
        // `extra` (may be empty: the MTP's input hidden rows) comes along into *extra_out.
        ForwardBatch mirror(const ops::ExecContext& from, const ForwardBatch& b,
                            const TensorView& extra = {}, TensorView* extra_out = nullptr);
        TensorView slot(size_t i, const TensorView& like);
        TensorView draft_rows(const TensorView& like); // a scratch of like's shape and dtype
    };
    std::vector<Rank> ranks;
    std::unique_ptr<RankThreads> threads;
};

TensorView Qwen35Model::Peers::Rank::slot(size_t i, const TensorView& like) {
    if (buffers.size() <= i) buffers.resize(i + 1);
    auto& [buffer, bytes] = buffers[i];
    if (bytes < like.nbytes()) {
        bytes = std::max<int64_t>(like.nbytes(), 2 * bytes);
        buffer = ops::device_allocator(ctx.device).allocate(bytes);
    }
    int64_t dims[kMaxDims];
    for (int d = 0; d < like.ndim; ++d) dims[d] = like.size(d);
    return TensorView::contiguous(buffer.get(), like.dtype, ctx.device, dims, like.ndim);
}

TensorView Qwen35Model::Peers::Rank::draft_rows(const TensorView& like) {
    if (draft_bytes < like.nbytes()) {
        draft_bytes = like.nbytes();
        draft_out = ops::device_allocator(ctx.device).allocate(draft_bytes);
    }
    return TensorView::contiguous(draft_out.get(), like.dtype, ctx.device,
                                  {like.size(0), like.size(1)});
}

ForwardBatch Qwen35Model::Peers::Rank::mirror(const ops::ExecContext& from, const ForwardBatch& b,
                                              const TensorView& extra, TensorView* extra_out) {
    ForwardBatch m = b;
    m.hidden_out = {};
    m.features = {};
    m.feature_layers.clear();
    if (extra_out) *extra_out = extra;
    if (from.device == ctx.device) { // one device, two streams: order after rank 0's uploads
        ops::stream_wait(ctx, from);
        return m;
    }
    size_t next = 0;
    auto moved = [&](const TensorView& v) {
        if (v.empty()) return v;
        const TensorView there = slot(next++, v);
        ops::copy_across(from, v, ctx, there);
        return there;
    };
    m.tokens = moved(b.tokens);
    m.positions = moved(b.positions);
    m.logit_rows = moved(b.logit_rows);
    m.seqs.row_begin = moved(b.seqs.row_begin);
    m.seqs.pos_begin = moved(b.seqs.pos_begin);
    m.seqs.state_slot = moved(b.seqs.state_slot);
    m.seqs.block_table = moved(b.seqs.block_table);
    m.seqs.snapshot_row = moved(b.seqs.snapshot_row);
    for (ForwardBatch::MediaRows& r : m.media) r.embeds = moved(r.embeds);
    if (extra_out) *extra_out = moved(extra);
    ops::stream_wait(ctx, from);
    return m;
}

std::unique_ptr<Qwen35Model> Qwen35Model::make_parallel(
    const io::ModelConfig& full, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives,
    const std::function<ModelWeights(int rank)>& weights_of, Tensor full_head) {
    const int N = int(ranks.size());
    require(N >= 1 && collectives.size() == ranks.size(), "tensor parallelism: ", N,
            " contexts for ", collectives.size(), " collectives");
    for (const ops::ExecContext& r : ranks)
        require(r.device.type == ranks[0].device.type && r.dtype == ranks[0].dtype,
                "tensor parallelism: every rank runs on one kind of device in one dtype (",
                device_name(ranks[0].device), " and ", device_name(r.device), ")");
    const io::ModelConfig shard = shard_config(full, N);
    std::vector<std::unique_ptr<Qwen35Model>> models;
    for (int r = 0; r < N; ++r) {
        ops::bind_device(ranks[size_t(r)]);
        models.push_back(std::make_unique<Qwen35Model>(shard, weights_of(r), ranks[size_t(r)].device));
        models.back()->shard_ = {r, N, collectives[size_t(r)]};
    }
    ops::bind_device(ranks[0]);
    std::unique_ptr<Qwen35Model> root = std::move(models[0]);
    root->full_head_ = std::move(full_head);
    if (N == 1) return root;
    root->peers_ = std::make_shared<Peers>();
    for (int r = 1; r < N; ++r)
        root->peers_->ranks.push_back({ranks[size_t(r)], std::move(models[size_t(r)]), {}, {}, 0});
    root->peers_->threads = std::make_unique<RankThreads>(N, collectives[0]);
    return root;
}

std::unique_ptr<Qwen35Model> Qwen35Model::load_parallel(
    const std::filesystem::path& dir, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives, Residency resident,
    const LoadProgress& progress, bool full_head) {
    require(!ranks.empty(), "tensor parallelism: no ranks");
    const io::ModelConfig config = io::load_hf_config(dir);
    shard_config(config, int(ranks.size())); // a layout that does not divide fails before loading
    ops::ExecContext host = ops::ExecContext::cpu();
    host.dtype = ranks[0].dtype;
    const io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(dir);
    const ModelWeights whole = load_weights(config, ckpt, host, resident, progress);
    Tensor head;
    if (full_head && ranks.size() > 1)
        head = cut_tensor(ranks[0], whole.lm_head.view(), 0, {{0, whole.lm_head.size(0)}});
    return make_parallel(
        config, ranks, collectives,
        [&](int r) { return shard_weights(config, whole, r, int(ranks.size()), ranks[size_t(r)]); },
        std::move(head));
}

std::unique_ptr<Qwen35Model> Qwen35Model::random_parallel(
    const io::ModelConfig& config, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives, uint64_t seed,
    Residency resident, bool full_head) {
    const int N = int(ranks.size());
    const io::ModelConfig shard = shard_config(config, N);
    Tensor head;
    std::unique_ptr<Qwen35Model> root = make_parallel(
        config, ranks, collectives,
        [&](int r) {
            ModelWeights w = random_weights(shard, ranks[size_t(r)], seed, resident);
            if (r == 0 && full_head && N > 1) head = w.lm_head; // the whole head, before its cut
            w.lm_head = shard_head(ranks[size_t(r)], w.lm_head, r, N);
            if (r != 0) w.vision = {};
            return w;
        },
        Tensor());
    root->full_head_ = std::move(head);
    return root;
}

void Qwen35Model::mtp_forward(const ops::ExecContext& ctx, const ForwardBatch& batch,
                              const TensorView& hidden, const CacheViews& caches,
                              const TensorView& draft_hidden, const TensorView& logits) {
    if (!peers_) return mtp_forward_rank(ctx, batch, hidden, caches, draft_hidden, logits);
    require(caches.peer_ranks.size() == peers_->ranks.size(), "mtp_forward: caches for ",
            caches.peer_ranks.size() + 1, " ranks, the model runs over ",
            peers_->ranks.size() + 1);
    peers_->threads->run([&](int r) {
        if (r == 0) return mtp_forward_rank(ctx, batch, hidden, caches, draft_hidden, logits);
        Peers::Rank& p = peers_->ranks[size_t(r - 1)];
        ops::bind_device(p.ctx);
        TensorView their_hidden;
        const ForwardBatch mirrored = p.mirror(ctx, batch, hidden, &their_hidden);
        p.model->mtp_forward_rank(p.ctx, mirrored, their_hidden, caches.peer_ranks[size_t(r - 1)],
                                  p.draft_rows(draft_hidden), TensorView{});
    });
    for (const Peers::Rank& p : peers_->ranks) ops::stream_wait(ctx, p.ctx);
}

void Qwen35Model::forward(const ops::ExecContext& ctx, const ForwardBatch& batch,
                          const CacheViews& caches, const TensorView& logits) {
    if (!peers_) return forward_rank(ctx, batch, caches, logits);
    require(caches.peer_ranks.size() == peers_->ranks.size(), "forward: caches for ",
            caches.peer_ranks.size() + 1, " ranks, the model runs over ",
            peers_->ranks.size() + 1);
    peers_->threads->run([&](int r) {
        if (r == 0) return forward_rank(ctx, batch, caches, logits);
        Peers::Rank& p = peers_->ranks[size_t(r - 1)];
        ops::bind_device(p.ctx);
        const ForwardBatch mirrored = p.mirror(ctx, batch);
        p.model->forward_rank(p.ctx, mirrored, caches.peer_ranks[size_t(r - 1)], TensorView{});
    });
    // Rank 0's stream goes on after every rank's work (events, no host wait): what it does next
    // (the next step's uploads into the buffers the ranks read, the sampler) is ordered after it.
    for (const Peers::Rank& p : peers_->ranks) ops::stream_wait(ctx, p.ctx);
}

} // namespace ninfer::model
