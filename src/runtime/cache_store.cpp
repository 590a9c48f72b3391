#include "runtime/cache_store.h"

#include "core/error.h"

namespace ninfer::runtime {

CacheStore::CacheStore(const ops::ExecContext& ctx, const model::CacheSpec& spec,
                       const MemoryPlan& plan, int32_t host_buffers)
    : ctx_(ctx), sequences_(plan.sequences), snapshot_rows_(plan.snapshot_rows),
      host_buffers_(host_buffers) {
    kv_ = std::make_unique<KvPool>(spec, plan.kv_blocks + 1, plan.block_size, ctx.device,
                                   ctx.dtype, plan.kv_dtype);
    states_ = std::make_unique<StatePool>(
        spec, plan.sequences + 1 + plan.snapshot_rows + plan.verify_rows, ctx.device, ctx.dtype);
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

model::CacheViews CacheStore::views() const {
    const auto& k = kv_->k_views();
    const auto& v = kv_->v_views();
    const auto split = k.begin() + kv_->attention_layers();
    const auto vsplit = v.begin() + kv_->attention_layers();
    model::CacheViews views{{k.begin(), split},         {v.begin(), vsplit},
                            states_->conv_views(),      states_->recurrent_views(),
                            {split, k.end()},           {vsplit, v.end()},
                            {},                         {}};
    const auto& draft = kv_->draft_views();
    for (size_t i = 0; i + 1 < draft.size(); i += 2) {
        views.draft_k_cache.push_back(draft[i]);
        views.draft_v_cache.push_back(draft[i + 1]);
    }
    return views;
}

uint8_t* CacheStore::host_buffer(int32_t index) {
    require(index >= 0 && index < host_buffers_, "CacheStore: no host buffer ", index);
    auto& b = host_[size_t(index)];
    if (b.empty()) b.resize(size_t(states_->row_bytes()));
    return b.data();
}

void CacheStore::run(const CacheOps& ops) {
    for (const CacheOp& op : ops) {
        switch (op.kind) {
        case CacheOp::Kind::ZeroSlot: states_->zero_row(ctx_, op.dst); break;
        case CacheOp::Kind::CopySlot: states_->copy_row(ctx_, op.src, op.dst); break;
        case CacheOp::Kind::SlotToHost:
            states_->download_row(ctx_, op.src, host_buffer(op.dst));
            break;
        case CacheOp::Kind::HostToSlot:
            states_->upload_row(ctx_, host_buffer(op.src), op.dst);
            break;
        case CacheOp::Kind::CopyBlock: kv_->copy_block(ctx_, op.src, op.dst); break;
        }
    }
}

} // namespace ninfer::runtime
