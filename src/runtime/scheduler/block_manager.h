// BlockManager: the bookkeeping of the paged KV pool (the device tensors live in KvPool).
// Blocks are reference-counted: a sequence holds one reference on each block of its table,
// and every prefix-cache snapshot holds one "cache" reference on each block of its prefix, so
// blocks shared by requests and snapshots are written once and freed when the last holder lets
// go. Blocks held by snapshots alone are reclaimable: evicting snapshots frees them.
#pragma once

#include <cstdint>
#include <vector>

namespace ninfer::runtime {

class BlockManager {
public:
    BlockManager(int64_t num_blocks, int32_t block_size);

    int32_t block_size() const { return block_size_; }
    int64_t num_blocks() const { return int64_t(refs_.size()); }
    int64_t free_blocks() const { return int64_t(free_.size()); }
    // Blocks whose every reference is a cache reference (freed if all snapshots went).
    int64_t cache_only_blocks() const { return cache_only_; }
    int64_t used_blocks() const { return num_blocks() - free_blocks(); }
    int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

    // n free blocks, each with one (sequence) reference; raises OutOfMemory when fewer are free.
    std::vector<int32_t> allocate(int64_t n);
    // One more reference on a held block (cache: a snapshot's reference).
    void retain(int32_t block, bool cache = false);
    // Drops one reference from each block (of the kind it was taken); blocks reaching zero
    // return to the free list, and are returned.
    std::vector<int32_t> release(const std::vector<int32_t>& blocks, bool cache = false);

private:
    void check_held(int32_t block, const char* what) const;
    void update_cache_only(int32_t block, bool before);
    bool is_cache_only(int32_t block) const;

    int32_t block_size_;
    std::vector<int32_t> free_;
    std::vector<int32_t> refs_, cache_refs_;
    int64_t cache_only_ = 0;
};

} // namespace ninfer::runtime
