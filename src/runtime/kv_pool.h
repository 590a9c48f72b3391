// KvPool: the device tensors of the paged KV cache of every full-attention layer (then the MTP
// layers', when speculation runs them; they share the block ids): num_blocks
// blocks of block_size tokens ([NB, bs, nKV, D] per layer and K/V). Which block holds what is
// the scheduler's business (scheduler/block_manager.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

class KvPool {
public:
    KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size, Device device,
           DType dtype);

    int32_t block_size() const { return block_size_; }
    int64_t num_blocks() const { return num_blocks_; }
    // Layers [0, attention_layers) are the model's; the MTP layers' follow.
    int64_t attention_layers() const { return attention_layers_; }
    // Bytes of one token's K and V over every attention layer.
    static int64_t bytes_per_token(const model::CacheSpec& spec, DType dtype);

    // Block dst = block src in every layer's K and V.
    void copy_block(const ops::ExecContext& ctx, int32_t src, int32_t dst) const;

    int64_t bytes() const;
    const std::vector<TensorView>& k_views() const { return k_views_; }
    const std::vector<TensorView>& v_views() const { return v_views_; }

private:
    int32_t block_size_;
    int64_t num_blocks_;
    int64_t attention_layers_;
    std::vector<Tensor> k_, v_;
    std::vector<TensorView> k_views_, v_views_;
};

} // namespace ninfer::runtime
