// SnapshotCache: the prefix cache of a hybrid model. An entry is the GDN conv and recurrent
// state after tokens[0, p) (a snapshot) together with the KV blocks of that prefix, so a request
// whose tokens extend the entry's resumes at p, whatever p is, and prefills only the rest.
//
// Entries are keyed like vLLM's block hashes: the chained hash of the prefix's full blocks
// (depth d = p / block_size), then the entry's d * block_size .. p tail tokens, which are
// compared exactly (a hit is verified token by token: a hash collision can never serve wrong
// state). Each entry holds a cache reference on each block of its prefix (its last, partial block
// included), so shared full blocks are never freed under it. States live in a bounded set of
// device rows of the state pool; the least recently used one moves to a host buffer when a
// host tier is configured (else it is dropped). Under KV pressure the scheduler evicts entries,
// least recently used first, which returns their blocks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/scheduler/block_manager.h"
#include "runtime/scheduler/cache_ops.h"

namespace ninfer::runtime {

// The chained hash of one block of tokens after the block whose hash is `parent` (0 first).
uint64_t chain_block_hash(uint64_t parent, const int32_t* tokens, int64_t n);

struct Snapshot {
    std::vector<int32_t> tokens; // the prefix: the state follows tokens[0, p), p = tokens.size()
    std::vector<int32_t> blocks; // its KV blocks: ceil(p / block_size)
    int32_t device_row = -1;     // a state-pool row, or
    int32_t host_buffer = -1;    // a host buffer
    uint64_t last_use = 0;
    uint64_t key = 0; // the index key of the prefix (depth and chained block hash)
    int64_t length() const { return int64_t(tokens.size()); }
};

class SnapshotCache {
public:
    // device_rows: the state-pool rows reserved for snapshots; host_buffers: host buffers (0: no
    // host tier).
    SnapshotCache(BlockManager& blocks, std::vector<int32_t> device_rows, int32_t host_buffers);

    // The deepest entry whose tokens are a prefix of tokens[0, max_length] (length <= max_length).
    std::optional<uint64_t> lookup(const std::vector<int32_t>& tokens, int64_t max_length) const;
    const Snapshot& get(uint64_t id) const { return entries_.at(id); }
    void touch(uint64_t id);

    // Records the state of state row `slot` after tokens[0, p), whose KV is in blocks[0..]:
    // appends the ops that save it (and move or drop an older entry to make room). An entry with
    // the same tokens is only touched.
    void insert(const int32_t* tokens, int64_t p, const std::vector<int32_t>& blocks, int32_t slot,
                CacheOps& ops);
    // Drops the least recently used entry (either tier), returning its blocks; false when empty.
    bool evict_one();

    int64_t on_device() const { return int64_t(device_lru_.size()); }
    int64_t on_host() const { return int64_t(host_lru_.size()); }
    int64_t device_capacity() const { return device_capacity_; }

private:
    uint64_t key_of(const int32_t* tokens, int64_t p) const;
    void erase(uint64_t id);
    // A device row for a new entry: a free one, or the least recently used entry's (moved to
    // the host tier with an op, or dropped).
    int32_t take_device_row(CacheOps& ops);

    BlockManager& blocks_;
    int64_t device_capacity_;
    std::vector<int32_t> free_rows_, free_host_;
    uint64_t next_id_ = 1, clock_ = 0;
    std::unordered_map<uint64_t, Snapshot> entries_;
    std::unordered_multimap<uint64_t, uint64_t> by_key_; // key_of(prefix) -> entry id
    std::map<uint64_t, uint64_t> device_lru_, host_lru_; // last_use -> entry id
};

} // namespace ninfer::runtime
