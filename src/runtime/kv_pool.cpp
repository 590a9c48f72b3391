#include "runtime/kv_pool.h"

#include <algorithm>

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

KvPool::KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size, Device device,
               DType dtype)
    : block_size_(block_size) {
    require(block_size > 0 && num_blocks > 0, "KvPool: block size and count must be positive");
    Allocator& a = ops::device_allocator(device);
    for (int64_t l = 0; l < spec.attention_layers; ++l) {
        k_.push_back(
            Tensor::empty(a, dtype, {num_blocks, block_size, spec.kv_heads, spec.head_dim}));
        v_.push_back(
            Tensor::empty(a, dtype, {num_blocks, block_size, spec.kv_heads, spec.head_dim}));
        k_views_.push_back(k_.back().view());
        v_views_.push_back(v_.back().view());
    }
    ref_counts_.assign(size_t(num_blocks), 0);
    // Hand out low block ids first (pop from the back).
    for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

std::vector<int32_t> KvPool::allocate(int64_t n) {
    require(n >= 0, "KvPool: cannot allocate ", n, " blocks");
    if (n > int64_t(free_.size()))
        fail(ErrorCategory::OutOfMemory, "KV cache full: need ", n, " blocks, ", free_.size(),
             " free");
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) {
        out.push_back(free_.back());
        free_.pop_back();
        ref_counts_[size_t(out.back())] = 1;
    }
    return out;
}

int64_t KvPool::bytes() const {
    int64_t n = 0;
    for (const auto& v : k_views_) n += v.nbytes();
    for (const auto& v : v_views_) n += v.nbytes();
    return n;
}

void KvPool::retain(int32_t block) {
    require(block >= 0 && block < num_blocks() && ref_counts_[size_t(block)] > 0,
            "KvPool: retain of a free block ", block);
    ++ref_counts_[size_t(block)];
}

void KvPool::release(const std::vector<int32_t>& blocks) {
    for (int32_t b : blocks) {
        require(b >= 0 && b < num_blocks() && ref_counts_[size_t(b)] > 0,
                "KvPool: release of a free block ", b);
        if (--ref_counts_[size_t(b)] == 0) free_.push_back(b);
    }
}

} // namespace ninfer::runtime
