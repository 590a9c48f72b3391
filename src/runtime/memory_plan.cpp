#include "runtime/memory_plan.h"

#include <algorithm>

#include "core/error.h"

namespace ninfer::runtime {
namespace {

// Shares of the budget taken by default when no count is given: sequence slots first (GDN
// state is per sequence and large: 64 MB a slot on the 35B), then snapshots, KV the rest. 0.3
// gives the 35B on an H200 (59 GB left after the weights) all 256 slots (16.5 GB): at 25% it got
// 241, and 128/1,024 decode at 256 concurrent ran 4,729 output tok/s against 5,990 with 256.
constexpr double kSlotShare = 0.30;
constexpr double kSnapshotShare = 0.15;

constexpr int64_t kGiB = int64_t(1) << 30;

std::string gib(int64_t bytes) {
    return concat(double(bytes) / double(kGiB), " GiB");
}

} // namespace

int64_t MemoryPlan::kv_tokens() const {
    return kv_blocks * block_size;
}

MemoryPlan plan_memory(const MemoryPlanInput& in) {
    require(in.block_size > 0 && in.max_context > 0, "memory plan: bad block size or context");
    require(in.sequences >= 0 && in.kv_tokens >= 0 && in.snapshots >= 0,
            "memory plan: negative counts");
    MemoryPlan plan;
    plan.block_size = in.block_size;
    const int64_t row = in.state_bytes_per_row, per_token = in.kv_bytes_per_token;
    const bool bounded = in.budget_bytes >= 0;
    const int64_t budget = bounded ? in.budget_bytes : 0;
    // The verification rows come off the top: their count is fixed by the speculation settings.
    const int64_t shared = std::max<int64_t>(budget - int64_t(in.verify_rows) * row, 0);
    auto rows_in = [&](double share) {
        return row > 0 ? int64_t(double(shared) * share / double(row)) : int64_t(kMaxAutoSequences);
    };
    if (in.sequences > 0)
        plan.sequences = in.sequences;
    else
        plan.sequences = bounded ? int32_t(std::clamp<int64_t>(rows_in(kSlotShare), 1,
                                                               kMaxAutoSequences))
                                 : kCpuSequences;
    const auto cpu_snapshots = [&] {
        const int64_t by_bytes = row > 0 ? kCpuSnapshotBytes / row : kCpuSnapshotsPerSequence;
        return int32_t(std::clamp<int64_t>(by_bytes, plan.sequences,
                                           int64_t(kCpuSnapshotsPerSequence) * plan.sequences));
    };
    if (in.prefix_cache)
        plan.snapshot_rows =
            in.snapshots > 0
                ? in.snapshots
                : (bounded ? int32_t(std::clamp<int64_t>(rows_in(kSnapshotShare), 1,
                                                         2 * int64_t(plan.sequences)))
                           : cpu_snapshots());
    plan.verify_rows = in.verify_rows;
    const int64_t state_bytes =
        (int64_t(plan.sequences) + 1 + plan.snapshot_rows + plan.verify_rows) * row;
    const int64_t context_blocks = (in.max_context + in.block_size - 1) / in.block_size;
    if (in.kv_tokens > 0) {
        plan.kv_blocks = (in.kv_tokens + in.block_size - 1) / in.block_size;
    } else if (bounded) {
        const int64_t left = budget - state_bytes - per_token * in.block_size; // padding block
        plan.kv_blocks = per_token > 0 ? std::max<int64_t>(left, 0) / (per_token * in.block_size)
                                       : context_blocks * plan.sequences;
    } else {
        plan.kv_blocks = context_blocks * std::min(plan.sequences, kCpuFullContexts);
    }
    const int64_t kv_bytes = (plan.kv_blocks + 1) * in.block_size * per_token;
    if (bounded && state_bytes + kv_bytes > budget)
        fail(ErrorCategory::OutOfMemory, "the KV cache (", plan.kv_blocks * in.block_size,
             " tokens, ", gib(kv_bytes), ") and GDN state (", plan.sequences, " sequences + ",
             plan.snapshot_rows, " snapshots, ", plan.verify_rows, " verification rows, ",
             gib(state_bytes), ") need more than the ",
             gib(budget),
             " left after the weights and workspace: lower --max-sequences, --kv-cache-tokens, "
             "--prefix-cache-snapshots, --draft-tokens or --max-context, or raise "
             "--gpu-memory-utilization");
    if (plan.kv_blocks < context_blocks)
        fail(ErrorCategory::OutOfMemory, "the KV cache holds ", plan.kv_blocks * in.block_size,
             " tokens, less than one sequence of the context (", in.max_context,
             "): lower --max-context, --max-sequences or --prefix-cache-snapshots, or raise "
             "--gpu-memory-utilization or --kv-cache-tokens");
    return plan;
}

} // namespace ninfer::runtime
