#include "runtime/scheduler/block_manager.h"

#include "core/error.h"

namespace ninfer::runtime {

BlockManager::BlockManager(int64_t num_blocks, int32_t block_size) : block_size_(block_size) {
    require(block_size > 0 && num_blocks > 0, "BlockManager: block size and count must be positive");
    refs_.assign(size_t(num_blocks), 0);
    cache_refs_.assign(size_t(num_blocks), 0);
    // Hand out low block ids first (pop from the back).
    for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

bool BlockManager::is_cache_only(int32_t b) const {
    return refs_[size_t(b)] > 0 && refs_[size_t(b)] == cache_refs_[size_t(b)];
}

void BlockManager::update_cache_only(int32_t b, bool before) {
    const bool after = is_cache_only(b);
    cache_only_ += int64_t(after) - int64_t(before);
}

std::vector<int32_t> BlockManager::allocate(int64_t n) {
    require(n >= 0, "BlockManager: cannot allocate ", n, " blocks");
    if (n > int64_t(free_.size()))
        fail(ErrorCategory::OutOfMemory, "KV cache full: need ", n, " blocks, ", free_.size(),
             " free");
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) {
        out.push_back(free_.back());
        free_.pop_back();
        refs_[size_t(out.back())] = 1;
    }
    return out;
}

void BlockManager::check_held(int32_t b, const char* what) const {
    require(b >= 0 && b < num_blocks() && refs_[size_t(b)] > 0, "BlockManager: ", what,
            " of a free block ", b);
}

void BlockManager::retain(int32_t b, bool cache) {
    check_held(b, "retain");
    const bool before = is_cache_only(b);
    ++refs_[size_t(b)];
    if (cache) ++cache_refs_[size_t(b)];
    update_cache_only(b, before);
}

std::vector<int32_t> BlockManager::release(const std::vector<int32_t>& blocks, bool cache) {
    std::vector<int32_t> freed;
    for (int32_t b : blocks) {
        check_held(b, "release");
        require(!cache || cache_refs_[size_t(b)] > 0, "BlockManager: cache release of block ", b,
                " without a cache reference");
        require(cache || refs_[size_t(b)] > cache_refs_[size_t(b)],
                "BlockManager: release of block ", b, " without a sequence reference");
        const bool before = is_cache_only(b);
        --refs_[size_t(b)];
        if (cache) --cache_refs_[size_t(b)];
        update_cache_only(b, before);
        if (refs_[size_t(b)] == 0) {
            free_.push_back(b);
            freed.push_back(b);
        }
    }
    return freed;
}

} // namespace ninfer::runtime
