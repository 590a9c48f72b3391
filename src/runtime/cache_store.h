// CacheStore: the memory behind the scheduler's ids. The KV pool (sequence blocks plus one
// padding block), the GDN state rows (sequence slots, one padding row for decode graphs, the
// prefix cache's device snapshot rows, the per-column rows of speculative verification) and the
// host snapshot buffers; it runs CacheOps.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/qwen3_5.h"
#include "ops/exec_context.h"
#include "runtime/kv_pool.h"
#include "runtime/memory_plan.h"
#include "runtime/scheduler/cache_ops.h"
#include "runtime/state_pool.h"

namespace ninfer::runtime {

class CacheStore {
public:
    CacheStore(const ops::ExecContext& ctx, const model::CacheSpec& spec, const MemoryPlan& plan,
               int32_t host_buffers);

    // Rows of the state pool: sequence slots [0, S), the padding row S, snapshots after it.
    int32_t padding_row() const { return sequences_; }
    std::vector<int32_t> snapshot_rows() const;
    // Verification rows: [verify_row_base(), + plan.verify_rows), after the snapshot rows.
    int32_t verify_row_base() const;
    // The padding block: the last block, never handed to a sequence.
    int32_t padding_block() const { return int32_t(kv_->num_blocks() - 1); }

    void run(const CacheOps& ops);

    const KvPool& kv() const { return *kv_; }
    const StatePool& states() const { return *states_; }
    model::CacheViews views() const;

private:
    uint8_t* host_buffer(int32_t index);

    ops::ExecContext ctx_;
    int32_t sequences_, snapshot_rows_, host_buffers_;
    std::unique_ptr<KvPool> kv_;
    std::unique_ptr<StatePool> states_;
    std::vector<std::vector<uint8_t>> host_; // allocated on first use
};

} // namespace ninfer::runtime
