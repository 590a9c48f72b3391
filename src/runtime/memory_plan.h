// Memory planning: how many sequence slots, prefix-cache snapshot rows and KV blocks the
// engine allocates. On CUDA the budget is what --gpu-memory-utilization leaves after the
// weights and the workspace of the largest step (measured by a profile forward); explicit
// counts are honoured and checked against it. A configuration that cannot fit is an error
// that says what to change.
#pragma once

#include <cstdint>

#include "ops/kv_cache.h"

namespace ninfer::runtime {

struct MemoryPlanInput {
    int64_t budget_bytes = -1;     // KV + state + snapshots; -1: unbounded (CPU)
    int64_t kv_bytes_per_token = 0;
    int64_t state_bytes_per_row = 0;
    int64_t max_context = 0;
    int32_t block_size = 16;
    int32_t sequences = 0;         // requested (0: from memory)
    int64_t kv_tokens = 0;         // requested (0: from memory)
    int32_t snapshots = 0;         // requested device snapshot rows (0: from memory)
    bool prefix_cache = true;
    int32_t verify_rows = 0;       // state rows for speculative verification (fixed count)
};

struct MemoryPlan {
    int32_t sequences = 0;     // sequence slots
    int32_t snapshot_rows = 0; // device snapshot rows (0 without the prefix cache)
    int64_t kv_blocks = 0;     // KV blocks for sequences (the padding block comes on top)
    int32_t verify_rows = 0;   // state rows for the per-column states of speculative verification
    int64_t kv_tokens() const;
    int32_t block_size = 16;
    ops::KvDtype kv_dtype = ops::KvDtype::Activation; // the KV pool's storage
};

// The largest number of sequences a plan gives when none is requested.
inline constexpr int32_t kMaxAutoSequences = 256;
// CPU defaults (no budget): slots, and KV for this many full contexts.
inline constexpr int32_t kCpuSequences = 16;
inline constexpr int32_t kCpuFullContexts = 8;
// CPU snapshot rows by default: this many per sequence slot (a conversation keeps its turn
// boundary and its last generation, and chats outnumber running slots), within
// kCpuSnapshotBytes of state, and never fewer than one per slot. With one per slot, 16
// concurrent 8-turn chats on the demo model served 0% of their prompts from the cache: every
// new snapshot evicted one a waiting conversation was about to resume from.
inline constexpr int32_t kCpuSnapshotsPerSequence = 8;
inline constexpr int64_t kCpuSnapshotBytes = int64_t(4) << 30;

MemoryPlan plan_memory(const MemoryPlanInput& in);

} // namespace ninfer::runtime
