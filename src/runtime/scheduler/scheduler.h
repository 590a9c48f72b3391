// Scheduler: decides every engine step from the requests and the pools (vLLM v1's shape: a
// plain plan handed to the runner). Policy lives here and nowhere else.
//
// - Order: requests run by (priority, arrival); lower priority values first.
// - Each step: one decode row per running sequence, then prompt chunks of at most
//   prefill_chunk rows, all within max_batch_tokens rows; chunks end at snapshot-stride
//   boundaries, and a long prompt leaves half of the remaining budget when others wait, so it
//   never starves short ones.
// - Admission: while a state slot is free and the head's first chunk fits the free (or
//   reclaimable) KV blocks; the head may preempt running requests of a worse priority.
// - KV blocks are allocated as sequences grow. When none are left, prefix-cache entries are
//   evicted (least recently used first), then the worst running request (lowest priority,
//   newest) is preempted: its blocks and slot are freed and it is recomputed later, resuming
//   from its deepest prefix-cache entry.
// - Prefix cache: a new or resumed sequence starts at the deepest snapshot its tokens extend;
//   snapshots are taken before the last token of every prompt (so the same prompt sent again
//   hits: that token then runs as a row of its own), at the request's cache_boundary (the
//   server sets it to the start of a chat prompt's generation prompt), every snapshot_stride
//   tokens of prefill, every decode_snapshot_stride positions of decoding (without
//   speculation), and at the end of every finished generation.
// - Speculation (with a DraftPolicy): a decoding sequence whose drafter context is ready gets
//   K draft rows (the policy's K for the step's decode batch, capped by its remaining
//   max_new_tokens, the context and the row budget) when its blocks for them are free without
//   evicting or preempting anything; at most verify_groups sequences draft in one step.
// The scheduler never touches device memory: data movement is returned as CacheOps.
#pragma once

#include <memory>
#include <vector>

#include "runtime/scheduler/block_manager.h"
#include "runtime/scheduler/cache_ops.h"
#include "runtime/scheduler/snapshot_cache.h"
#include "runtime/sequence.h"
#include "runtime/speculative/draft_policy.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

struct SchedulerConfig {
    int32_t max_sequences = 1;    // sequence slots: state rows [0, max_sequences)
    int64_t max_batch_tokens = 1; // rows per step
    int64_t prefill_chunk = 1;    // prompt rows of one sequence per step
    int64_t snapshot_stride = 0;  // tokens (0: no stride snapshots)
    int64_t decode_snapshot_stride = 0; // positions p % stride == 0 past the prompt (0: none)
    int32_t verify_groups = 0;    // sequences that may verify drafts in one step
    int64_t max_context = 0;      // positions a sequence may use (0: unbounded)
};

struct SchedulerStats {
    int64_t prefix_query_tokens = 0; // prompt tokens of first admissions
    int64_t prefix_hit_tokens = 0;   // of those, served from the prefix cache
    int64_t prefill_only_tokens = 0; // prompt tokens prefill_only requests computed
    int64_t preemptions = 0;
    int64_t steps = 0;              // plans with at least one sequence
    int64_t max_step_sequences = 0; // the most sequences one plan carried
};

class Scheduler {
public:
    // snapshots: nullptr turns the prefix cache off.
    // policy: nullptr turns speculation off.
    Scheduler(const SchedulerConfig& config, BlockManager& blocks, SnapshotCache* snapshots,
              DraftPolicy* policy = nullptr);

    void add(std::unique_ptr<Sequence> seq);

    struct Step {
        StepPlan plan;  // empty when nothing can run
        CacheOps setup; // run before the forward: state zeroing, snapshot restores, block copies
    };
    Step schedule();
    // After the step's forward: advances each entry's cached tokens by its committed rows and
    // takes the snapshots that are due. The ops run before anything else touches the state rows.
    CacheOps after_forward(const StepPlan& plan);
    // Ends a sequence (running or waiting): with snapshot, its state at `cached` tokens is kept
    // in the prefix cache; frees its slot and blocks and marks it done. Without (a failed
    // request), the blocks it alone held are zeroed. The ops run at once.
    CacheOps finish(Sequence& seq, bool snapshot);
    // Drops done sequences.
    void collect();

    const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
    const std::vector<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
    int32_t free_slots() const { return int32_t(free_slots_.size()); }
    const SchedulerStats& stats() const { return stats_; }
    const SchedulerConfig& config() const { return config_; }
    // The draft tokens the policy chose for the latest step (0: it did not speculate).
    int draft_tokens() const { return draft_tokens_; }

private:
    int64_t chunk_rows(const Sequence& seq, int64_t budget, bool others_wait) const;
    int32_t draft_rows(Sequence& seq, int k, int64_t budget);
    bool grow(Sequence& seq, int64_t tokens, int64_t& budget);
    Sequence* worst_running();
    void preempt(Sequence& victim, int64_t& budget);
    bool admit_head(int64_t& budget, CacheOps& ops);
    void supersede_warms(const Sequence& admitted);
    void start_from_prefix(Sequence& seq, CacheOps& ops);
    void insert_sorted(std::vector<std::unique_ptr<Sequence>>& list, std::unique_ptr<Sequence> s);
    StepPlan build_plan() const;

    SchedulerConfig config_;
    BlockManager& blocks_;
    SnapshotCache* snapshots_;
    DraftPolicy* policy_;
    std::vector<int32_t> free_slots_;
    std::vector<std::unique_ptr<Sequence>> running_, waiting_; // each in (priority, arrival) order
    SchedulerStats stats_;
    int draft_tokens_ = 0;
};

} // namespace ninfer::runtime
