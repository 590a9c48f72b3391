// KvPool: the paged KV cache of every full-attention layer. Fixed-size blocks of block_size
// tokens, handed out by a free list with reference counts (shared prefixes retain blocks).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"

namespace ninfer::runtime {

class KvPool {
public:
    KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size, Device device,
           DType dtype);

    int32_t block_size() const { return block_size_; }
    int64_t num_blocks() const { return int64_t(ref_counts_.size()); }
    int64_t free_blocks() const { return int64_t(free_.size()); }
    int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

    // Takes n blocks (each with one reference); raises OutOfMemory when fewer are free.
    std::vector<int32_t> allocate(int64_t n);
    void retain(int32_t block);
    // Drops one reference from each block; blocks reaching zero return to the free list.
    void release(const std::vector<int32_t>& blocks);

    int64_t bytes() const;
    const std::vector<TensorView>& k_views() const { return k_views_; }
    const std::vector<TensorView>& v_views() const { return v_views_; }

private:
    int32_t block_size_;
    std::vector<Tensor> k_, v_;
    std::vector<TensorView> k_views_, v_views_;
    std::vector<int32_t> free_;
    std::vector<int32_t> ref_counts_;
};

} // namespace ninfer::runtime
