#include "runtime/scheduler/snapshot_cache.h"

#include <algorithm>

#include "core/error.h"

namespace ninfer::runtime {
namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The key of an entry: its depth (full blocks) and the chain hash of those blocks.
uint64_t depth_key(int64_t depth, uint64_t chain) {
    return splitmix64(chain ^ splitmix64(uint64_t(depth)));
}

} // namespace

uint64_t chain_block_hash(uint64_t parent, const int32_t* tokens, int64_t n) {
    uint64_t h = splitmix64(parent ^ 0x5851F42D4C957F2Dull);
    for (int64_t i = 0; i < n; ++i) h = splitmix64(h ^ uint64_t(uint32_t(tokens[i])));
    return h;
}

SnapshotCache::SnapshotCache(BlockManager& blocks, std::vector<int32_t> device_rows,
                             int32_t host_buffers)
    : blocks_(blocks), device_capacity_(int64_t(device_rows.size())),
      free_rows_(std::move(device_rows)) {
    require(device_capacity_ > 0, "SnapshotCache: needs at least one device row");
    require(host_buffers >= 0, "SnapshotCache: negative host buffer count");
    for (int32_t h = host_buffers - 1; h >= 0; --h) free_host_.push_back(h);
    std::reverse(free_rows_.begin(), free_rows_.end()); // low rows first
}

uint64_t SnapshotCache::key_of(const int32_t* tokens, int64_t p) const {
    const int64_t bs = blocks_.block_size(), depth = p / bs;
    uint64_t chain = 0;
    for (int64_t d = 0; d < depth; ++d) chain = chain_block_hash(chain, tokens + d * bs, bs);
    return depth_key(depth, chain);
}

std::optional<uint64_t> SnapshotCache::lookup(const std::vector<int32_t>& tokens,
                                              int64_t max_length) const {
    max_length = std::min<int64_t>(max_length, int64_t(tokens.size()));
    if (entries_.empty() || max_length <= 0) return std::nullopt;
    const int64_t bs = blocks_.block_size(), depth = max_length / bs;
    std::vector<uint64_t> chain(size_t(depth) + 1, 0); // chain[d]: hash of blocks [0, d)
    for (int64_t d = 0; d < depth; ++d)
        chain[size_t(d) + 1] = chain_block_hash(chain[size_t(d)], tokens.data() + d * bs, bs);
    for (int64_t d = depth; d >= 0; --d) { // deepest first: entries at depth d have p >= d * bs
        std::optional<uint64_t> best;
        int64_t best_length = 0;
        const auto range = by_key_.equal_range(depth_key(d, chain[size_t(d)]));
        for (auto it = range.first; it != range.second; ++it) {
            const Snapshot& s = entries_.at(it->second);
            const int64_t p = s.length();
            if (p > max_length || p <= best_length) continue;
            if (!std::equal(s.tokens.begin(), s.tokens.end(), tokens.begin())) continue;
            best = it->second;
            best_length = p;
        }
        if (best) return best;
    }
    return std::nullopt;
}

void SnapshotCache::touch(uint64_t id) {
    Snapshot& s = entries_.at(id);
    auto& lru = s.device_row >= 0 ? device_lru_ : host_lru_;
    lru.erase(s.last_use);
    s.last_use = ++clock_;
    lru.emplace(s.last_use, id);
}

void SnapshotCache::erase(uint64_t id) {
    Snapshot& s = entries_.at(id);
    if (s.device_row >= 0) {
        device_lru_.erase(s.last_use);
        free_rows_.push_back(s.device_row);
    } else {
        host_lru_.erase(s.last_use);
        free_host_.push_back(s.host_buffer);
    }
    blocks_.release(s.blocks, /*cache=*/true);
    const auto range = by_key_.equal_range(s.key);
    for (auto it = range.first; it != range.second; ++it)
        if (it->second == id) {
            by_key_.erase(it);
            break;
        }
    entries_.erase(id);
}

bool SnapshotCache::evict_one() {
    const bool have_device = !device_lru_.empty(), have_host = !host_lru_.empty();
    if (!have_device && !have_host) return false;
    const bool host_older =
        have_host && (!have_device || host_lru_.begin()->first < device_lru_.begin()->first);
    erase(host_older ? host_lru_.begin()->second : device_lru_.begin()->second);
    return true;
}

int32_t SnapshotCache::take_device_row(CacheOps& ops) {
    if (free_rows_.empty()) {
        const uint64_t victim = device_lru_.begin()->second;
        Snapshot& v = entries_.at(victim);
        if (free_host_.empty() && !host_lru_.empty()) erase(host_lru_.begin()->second);
        if (free_host_.empty()) {
            erase(victim); // no host tier: dropped
        } else {
            v.host_buffer = free_host_.back();
            free_host_.pop_back();
            ops.push_back({CacheOp::Kind::SlotToHost, v.device_row, v.host_buffer});
            device_lru_.erase(v.last_use);
            host_lru_.emplace(v.last_use, victim);
            free_rows_.push_back(v.device_row);
            v.device_row = -1;
        }
    }
    const int32_t row = free_rows_.back();
    free_rows_.pop_back();
    return row;
}

void SnapshotCache::insert(const int32_t* tokens, int64_t p, const std::vector<int32_t>& blocks,
                           int32_t slot, CacheOps& ops) {
    require(p > 0, "SnapshotCache: empty prefix");
    const int64_t nblocks = blocks_.blocks_for(p);
    require(int64_t(blocks.size()) >= nblocks, "SnapshotCache: prefix of ", p, " tokens needs ",
            nblocks, " blocks, got ", blocks.size());
    const uint64_t key = key_of(tokens, p);
    const auto range = by_key_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
        const Snapshot& s = entries_.at(it->second);
        if (s.length() == p && std::equal(s.tokens.begin(), s.tokens.end(), tokens)) {
            touch(it->second);
            return;
        }
    }
    Snapshot s;
    s.tokens.assign(tokens, tokens + p);
    s.blocks.assign(blocks.begin(), blocks.begin() + nblocks);
    for (int32_t b : s.blocks) blocks_.retain(b, /*cache=*/true);
    s.device_row = take_device_row(ops);
    s.last_use = ++clock_;
    s.key = key;
    ops.push_back({CacheOp::Kind::CopySlot, slot, s.device_row});
    const uint64_t id = next_id_++;
    device_lru_.emplace(s.last_use, id);
    by_key_.emplace(key, id);
    entries_.emplace(id, std::move(s));
}

} // namespace ninfer::runtime
