// CacheOp: one data movement the scheduler asks of the runner, between the rows of the GDN state
// pool (sequence slots, the padding slot, snapshot slots), host snapshot buffers and KV blocks.
// The scheduler never touches device memory; the runner executes a list of ops in order, on
// the engine's stream, before the next forward.
#pragma once

#include <cstdint>
#include <vector>

namespace ninfer::runtime {

struct CacheOp {
    enum class Kind {
        ZeroSlot,   // state row dst = 0 (a sequence starts from the empty state)
        CopySlot,   // state row dst = state row src (take or restore a snapshot)
        SlotToHost, // host buffer dst = state row src (a snapshot leaves the device)
        HostToSlot, // state row dst = host buffer src (restore a host snapshot)
        CopyBlock,  // KV block dst = KV block src, every attention layer (copy-on-write)
        ZeroBlock,  // KV block dst = 0, every attention layer (a failed sequence's, freed)
    };
    Kind kind;
    int32_t src = -1;
    int32_t dst = -1;
    bool operator==(const CacheOp&) const = default;
};

using CacheOps = std::vector<CacheOp>;

} // namespace ninfer::runtime
