#include "runtime/cache_store.h"

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

CacheStore::CacheStore(const ops::ExecContext& ctx, const model::CacheSpec& spec,
                       const MemoryPlan& plan, int32_t host_buffers,
                       const std::vector<ops::ExecContext>& peer_ranks)
    : sequences_(plan.sequences), snapshot_rows_(plan.snapshot_rows),
      host_buffers_(host_buffers) {
    std::vector<ops::ExecContext> contexts{ctx};
    contexts.insert(contexts.end(), peer_ranks.begin(), peer_ranks.end());
    // A DFlash drafter runs on rank 0 alone: the other ranks' pools hold no context for it.
    model::CacheSpec peer_spec = spec;
    peer_spec.draft_layers = 0;
    for (const ops::ExecContext& c : contexts) {
        ops::bind_device(c);
        Rank r{c, nullptr, nullptr};
        r.kv = std::make_unique<KvPool>(ranks_.empty() ? spec : peer_spec, plan.kv_blocks + 1,
                                        plan.block_size, c, c.dtype, plan.kv_dtype);
        r.states = std::make_unique<StatePool>(
            spec, plan.sequences + 1 + plan.snapshot_rows + plan.verify_rows, c.device, c.dtype);
        ranks_.push_back(std::move(r));
    }
    ops::bind_device(ctx);
    host_.resize(size_t(host_buffers));
}

std::vector<int32_t> CacheStore::snapshot_rows() const {
    std::vector<int32_t> rows;
    for (int32_t i = 0; i < snapshot_rows_; ++i) rows.push_back(sequences_ + 1 + i);
    return rows;
}

int32_t CacheStore::verify_row_base() const {
    return sequences_ + 1 + snapshot_rows_;
}

model::CacheViews CacheStore::views_of(const Rank& r) {
    const auto& k = r.kv->k_views();
    const auto& v = r.kv->v_views();
    const auto split = k.begin() + r.kv->attention_layers();
    const auto vsplit = v.begin() + r.kv->attention_layers();
    model::CacheViews views{{k.begin(), split},         {v.begin(), vsplit},
                            r.states->conv_views(),     r.states->recurrent_views(),
                            {split, k.end()},           {vsplit, v.end()},
                            {},                         {},
                            {}};
    const auto& draft = r.kv->draft_views();
    for (size_t i = 0; i + 1 < draft.size(); i += 2) {
        views.draft_k_cache.push_back(draft[i]);
        views.draft_v_cache.push_back(draft[i + 1]);
    }
    return views;
}

model::CacheViews CacheStore::views() const {
    model::CacheViews views = views_of(ranks_[0]);
    for (size_t r = 1; r < ranks_.size(); ++r) views.peer_ranks.push_back(views_of(ranks_[r]));
    return views;
}

uint8_t* CacheStore::host_buffer(int32_t index) {
    require(index >= 0 && index < host_buffers_, "CacheStore: no host buffer ", index);
    auto& b = host_[size_t(index)];
    if (b.empty()) b.resize(size_t(ranks_[0].states->row_bytes()) * ranks_.size());
    return b.data();
}

void CacheStore::run(const CacheOps& ops) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
        const Rank& r = ranks_[i];
        const ops::ExecContext& ctx = r.ctx;
        StatePool& states = *r.states;
        const size_t host_offset = i * size_t(states.row_bytes());
        if (i > 0) ops::bind_device(ctx);
        for (const CacheOp& op : ops) {
            switch (op.kind) {
            case CacheOp::Kind::ZeroSlot: states.zero_row(ctx, op.dst); break;
            case CacheOp::Kind::CopySlot: states.copy_row(ctx, op.src, op.dst); break;
            case CacheOp::Kind::SlotToHost:
                states.download_row(ctx, op.src, host_buffer(op.dst) + host_offset);
                break;
            case CacheOp::Kind::HostToSlot:
                states.upload_row(ctx, host_buffer(op.src) + host_offset, op.dst);
                break;
            case CacheOp::Kind::CopyBlock: r.kv->copy_block(ctx, op.src, op.dst); break;
            case CacheOp::Kind::ZeroBlock: r.kv->zero_block(ctx, op.dst); break;
            }
        }
    }
    if (ranks_.size() > 1) ops::bind_device(ranks_[0].ctx);
}

} // namespace ninfer::runtime
