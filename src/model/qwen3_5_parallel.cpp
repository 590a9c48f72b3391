// Qwen35Model under tensor parallelism (model/tensor_parallel.h): the rank models, their threads,
// and the forward that runs every rank over one batch.
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/qwen3_5.h"
#include "model/weight_cut.h"
#include "model/tensor_parallel.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/memory.h"

namespace ninfer::model {

namespace {

// Device memory that grows (doubling) to hold a view of another's shape and dtype.
struct GrowingBuffer {
    Buffer buffer;
    int64_t bytes = 0;

    TensorView like(Device device, const TensorView& shape) {
        if (bytes < shape.nbytes()) {
            bytes = std::max<int64_t>(shape.nbytes(), 2 * bytes);
            buffer = ops::device_allocator(device).allocate(bytes);
        }
        int64_t dims[kMaxDims];
        for (int d = 0; d < shape.ndim; ++d) dims[d] = shape.size(d);
        return TensorView::contiguous(buffer.get(), shape.dtype, device, dims, shape.ndim);
    }
};

} // namespace

// Rank r >= 1: its context, its model, and its device's copies of each batch's index tensors.
struct Qwen35Model::Peers {
    struct Rank {
        ops::ExecContext ctx;
        std::unique_ptr<Qwen35Model> model;
        std::vector<GrowingBuffer> mirrored; // the batch's views on this device, in mirror order
        GrowingBuffer draft; // the MTP's draft hidden rows this rank computes (rank 0's are kept)
        GrowingBuffer proposal_rows; // project_to_vocab's input rows, on this rank's device

        // The batch as this rank reads it: the same host arrays; device views copied to this
        // rank's device when it is another one; no hidden-state or feature outputs (rank 0's).
        // `extra` (may be empty: the MTP's input hidden rows) comes along into *extra_out.
        ForwardBatch mirror(const ops::ExecContext& from, const ForwardBatch& b,
                            const TensorView& extra = {}, TensorView* extra_out = nullptr);
    };
    std::vector<Rank> ranks;
    std::unique_ptr<RankThreads> threads;

    // Runs rank 0's part on the calling thread and each other rank's in its thread, then orders
    // rank 0's stream after every rank's work (events, no host wait): what it does next (the next
    // step's uploads into the buffers the ranks read, the sampler) follows them.
    void run(const ops::ExecContext& ctx, const CacheViews& caches, const char* op,
             const std::function<void()>& root,
             const std::function<void(Rank&, const CacheViews&)>& peer);
    // The same without caches (work on the weights alone).
    void run(const ops::ExecContext& ctx, const std::function<void()>& root,
             const std::function<void(Rank&)>& peer);
};

void Qwen35Model::Peers::run(const ops::ExecContext& ctx, const CacheViews& caches,
                             const char* op, const std::function<void()>& root,
                             const std::function<void(Rank&, const CacheViews&)>& peer) {
    require(caches.peer_ranks.size() == ranks.size(), op, ": caches for ",
            caches.peer_ranks.size() + 1, " ranks, the model runs over ", ranks.size() + 1);
    run(ctx, root, [&](Rank& p) { peer(p, caches.peer_ranks[size_t(&p - ranks.data())]); });
}

void Qwen35Model::Peers::run(const ops::ExecContext& ctx, const std::function<void()>& root,
                             const std::function<void(Rank&)>& peer) {
    threads->run([&](int r) {
        if (r == 0) return root();
        Rank& p = ranks[size_t(r - 1)];
        ops::bind_device(p.ctx);
        peer(p);
    });
    for (const Rank& p : ranks) ops::stream_wait(ctx, p.ctx);
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
        if (mirrored.size() <= next) mirrored.resize(next + 1);
        const TensorView there = mirrored[next++].like(ctx.device, v);
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

void Qwen35Model::set_context_limit(int64_t positions) {
    if (positions != context_limit_) { // rebuilt for the new limit on the next forward
        rope_position_cos_ = Tensor();
        rope_position_sin_ = Tensor();
    }
    context_limit_ = positions;
    if (peers_)
        for (auto& rank : peers_->ranks) rank.model->set_context_limit(positions);
}

std::unique_ptr<Qwen35Model> Qwen35Model::make_parallel(
    const io::ModelConfig& full, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives, bool expert_parallel,
    const std::function<ModelWeights(int rank, const io::ModelConfig& shard)>& weights_of) {
    const int N = int(ranks.size());
    require(N >= 1 && collectives.size() == ranks.size(), "tensor parallelism: ", N,
            " contexts for ", collectives.size(), " collectives");
    for (const ops::ExecContext& r : ranks)
        require(r.device.type == ranks[0].device.type && r.dtype == ranks[0].dtype,
                "tensor parallelism: every rank runs on one kind of device in one dtype (",
                device_name(ranks[0].device), " and ", device_name(r.device), ")");
    std::vector<std::unique_ptr<Qwen35Model>> models;
    for (int r = 0; r < N; ++r) {
        ops::bind_device(ranks[size_t(r)]);
        const io::ModelConfig shard = shard_config(full, {N, expert_parallel}, r);
        models.push_back(
            std::make_unique<Qwen35Model>(shard, weights_of(r, shard), ranks[size_t(r)].device));
        models.back()->shard_ = {r, N, collectives[size_t(r)]};
    }
    ops::bind_device(ranks[0]);
    std::unique_ptr<Qwen35Model> root = std::move(models[0]);
    if (N == 1) return root;
    root->peers_ = std::make_shared<Peers>();
    for (int r = 1; r < N; ++r)
        root->peers_->ranks.push_back({ranks[size_t(r)], std::move(models[size_t(r)]), {}, {}, {}});
    root->peers_->threads = std::make_unique<RankThreads>(N, collectives[0]);
    return root;
}

std::unique_ptr<Qwen35Model> Qwen35Model::load_parallel(
    const std::filesystem::path& dir, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives, Residency resident,
    const LoadProgress& progress, ParallelOptions opts) {
    require(!ranks.empty(), "tensor parallelism: no ranks");
    const io::ModelConfig config = io::load_hf_config(dir);
    const ParallelLayout layout{int(ranks.size()), opts.expert_parallel};
    shard_config(config, layout); // a layout that does not divide fails before loading
    ops::ExecContext host = ops::ExecContext::cpu();
    host.dtype = ranks[0].dtype;
    const io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(dir);
    // Each decoder layer is cut for every rank as soon as it is bound, and dropped from the host:
    // the host holds one layer (and the embedding and head), not the whole model.
    std::vector<std::vector<LayerWeights>> layers(ranks.size()), mtp_layers(ranks.size());
    auto cut_layer = [&](LayerWeights layer, int64_t, bool mtp) {
        for (size_t r = 0; r < ranks.size(); ++r) {
            ops::bind_device(ranks[r]);
            (mtp ? mtp_layers : layers)[r].push_back(
                shard_layer(config, layer, int(r), layout, ranks[r]));
        }
        return LayerWeights{};
    };
    ModelWeights whole = load_weights(config, ckpt, host, resident, progress,
                                      kLoadProgressStepBytes, {}, cut_layer);
    whole.layers.clear();
    whole.mtp.layers.clear();
    std::unique_ptr<Qwen35Model> root =
        make_parallel(config, ranks, collectives, opts.expert_parallel,
                      [&](int r, const io::ModelConfig&) {
            ModelWeights w = shard_weights(config, whole, r, layout, ranks[size_t(r)]);
            w.layers = std::move(layers[size_t(r)]);
            w.mtp.layers = std::move(mtp_layers[size_t(r)]);
            return w;
        });
    return root;
}

std::unique_ptr<Qwen35Model> Qwen35Model::random_parallel(
    const io::ModelConfig& config, const std::vector<ops::ExecContext>& ranks,
    const std::vector<std::shared_ptr<ops::Collective>>& collectives, uint64_t seed,
    Residency resident, ParallelOptions opts) {
    const int N = int(ranks.size());
    return make_parallel(config, ranks, collectives, opts.expert_parallel,
                         [&](int r, const io::ModelConfig& shard) {
        ModelWeights w = random_weights(shard, ranks[size_t(r)], seed, resident);
        w.lm_head = shard_head(ranks[size_t(r)], w.lm_head, r, N);
        if (r != 0) w.vision = {};
        return w;
    });
}

// ---- The head outside a forward (a drafter's proposal) ----

void Qwen35Model::project_to_vocab(const ops::ExecContext& ctx, const TensorView& rows,
                                   const TensorView& logits) {
    // head() without the final norm on every rank: each rank's vocabulary columns, gathered on
    // rank 0, as for the model's own logits.
    if (!peers_) return project_rank(ctx, rows, logits);
    peers_->run(
        ctx, [&] { project_rank(ctx, rows, logits); },
        [&](Peers::Rank& p) {
            TensorView theirs = rows;
            if (p.ctx.device != ctx.device) { // the rows to this rank's device
                theirs = p.proposal_rows.like(p.ctx.device, rows);
                ops::copy_across(ctx, rows, p.ctx, theirs);
            }
            ops::stream_wait(p.ctx, ctx);
            p.model->project_rank(p.ctx, theirs, TensorView{});
        });
}

Tensor Qwen35Model::head_rows(const ops::ExecContext& ctx, const std::vector<int32_t>& ids) const {
    const int64_t S = int64_t(ids.size()), H = weights_.lm_head.size(1);
    const int N = shard_.ranks;
    const int64_t V = N > 1 ? config_.vocab_size : weights_.lm_head.size(0);
    Allocator& alloc = ops::device_allocator(ctx.device);
    auto upload_ids = [](const ops::ExecContext& c, std::vector<int32_t>& v) {
        Tensor t = Tensor::empty(ops::device_allocator(c.device), DType::I32, {int64_t(v.size())});
        ops::upload(c, TensorView::contiguous(v.data(), DType::I32, Device::cpu(),
                                              {int64_t(v.size())}), t);
        return t;
    };
    for (int32_t id : ids)
        require(id >= 0 && id < V, "head_rows: id ", id, " outside the head's ", V, " rows");
    // Each rank's rows, in rank order, into `grouped`; grouped_row[i]: where ids[i] landed.
    Tensor grouped = Tensor::empty(alloc, weights_.lm_head.view().dtype, {S, H});
    std::vector<int32_t> grouped_row(ids.size(), -1);
    std::vector<Tensor> keep; // the ranks' gathers and ids, alive until the copies are done
    int64_t filled = 0;
    for (int r = 0; r < N; ++r) {
        const bool root = r == 0;
        const ops::ExecContext& c = root ? ctx : peers_->ranks[size_t(r - 1)].ctx;
        const Qwen35Model& m = root ? *this : *peers_->ranks[size_t(r - 1)].model;
        const RankRange run = N > 1 ? rank_range(V, r, N) : RankRange{0, V};
        std::vector<int32_t> local;
        for (size_t i = 0; i < ids.size(); ++i)
            if (ids[i] >= run.begin && ids[i] < run.begin + run.count) {
                grouped_row[i] = int32_t(filled + int64_t(local.size()));
                local.push_back(int32_t(ids[i] - run.begin));
            }
        if (local.empty()) continue;
        const int64_t k = int64_t(local.size());
        ops::bind_device(c);
        keep.push_back(upload_ids(c, local));
        Tensor there = Tensor::empty(ops::device_allocator(c.device), grouped.view().dtype, {k, H});
        ops::embedding(c, keep.back(), m.weights_.lm_head, there);
        ops::copy_across(c, there, ctx, grouped.view().narrow(0, filled, k));
        ops::stream_wait(ctx, c);
        keep.push_back(std::move(there));
        filled += k;
    }
    ops::bind_device(ctx);
    // Back into list order.
    Tensor perm = upload_ids(ctx, grouped_row);
    Tensor out = Tensor::empty(alloc, grouped.view().dtype, {S, H});
    ops::embedding(ctx, perm, grouped, out);
    ops::synchronize(ctx); // the temporaries die here
    return out;
}

void Qwen35Model::mtp_forward(const ops::ExecContext& ctx, const ForwardBatch& batch,
                              const TensorView& hidden, const CacheViews& caches,
                              const TensorView& draft_hidden, const TensorView& logits) {
    if (!peers_) return mtp_forward_rank(ctx, batch, hidden, caches, draft_hidden, logits);
    peers_->run(
        ctx, caches, "mtp_forward",
        [&] { mtp_forward_rank(ctx, batch, hidden, caches, draft_hidden, logits); },
        [&](Peers::Rank& p, const CacheViews& theirs) {
            TensorView their_hidden;
            const ForwardBatch mirrored = p.mirror(ctx, batch, hidden, &their_hidden);
            p.model->mtp_forward_rank(p.ctx, mirrored, their_hidden, theirs,
                                      p.draft.like(p.ctx.device, draft_hidden), TensorView{});
        });
}

void Qwen35Model::forward(const ops::ExecContext& ctx, const ForwardBatch& batch,
                          const CacheViews& caches, const TensorView& logits) {
    if (!peers_) return forward_rank(ctx, batch, caches, logits);
    peers_->run(
        ctx, caches, "forward", [&] { forward_rank(ctx, batch, caches, logits); },
        [&](Peers::Rank& p, const CacheViews& theirs) {
            p.model->forward_rank(p.ctx, p.mirror(ctx, batch), theirs, TensorView{});
        });
}

} // namespace ninfer::model
