// CacheStore: the memory behind the scheduler's ids. The KV pool (sequence blocks plus one
// padding block), the GDN state rows (sequence slots, one padding row for decode graphs, the
// prefix cache's device snapshot rows, the per-column rows of speculative verification) and the
// host snapshot buffers; it runs CacheOps. Under tensor parallelism every rank holds pools of the
// same (shard) shapes under the same ids, and each CacheOp runs on all of them.
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
    // peer_ranks: the contexts of tensor-parallel ranks 1..N-1 (empty: one device).
    CacheStore(const ops::ExecContext& ctx, const model::CacheSpec& spec, const MemoryPlan& plan,
               int32_t host_buffers, const std::vector<ops::ExecContext>& peer_ranks = {});

    // Rows of the state pool: sequence slots [0, S), the padding row S, snapshots after it.
    int32_t padding_row() const { return sequences_; }
    std::vector<int32_t> snapshot_rows() const;
    // Verification rows: [verify_row_base(), + plan.verify_rows), after the snapshot rows.
    int32_t verify_row_base() const;
    // The padding block: the last block, never handed to a sequence.
    int32_t padding_block() const { return int32_t(kv().num_blocks() - 1); }

    void run(const CacheOps& ops);

    const KvPool& kv() const { return *ranks_[0].kv; }
    const StatePool& states() const { return *ranks_[0].states; }
    // Rank 0's views, with every other rank's in peer_ranks.
    model::CacheViews views() const;

private:
    struct Rank {
        ops::ExecContext ctx;
        std::unique_ptr<KvPool> kv;
        std::unique_ptr<StatePool> states;
    };
    static model::CacheViews views_of(const Rank& r);
    // A host snapshot holds one state row of every rank, rank after rank.
    uint8_t* host_buffer(int32_t index);

    int32_t sequences_, snapshot_rows_, host_buffers_;
    std::vector<Rank> ranks_;
    std::vector<std::vector<uint8_t>> host_; // allocated on first use
};

} // namespace ninfer::runtime
