// KvPool: the device tensors of the paged KV cache of every full-attention layer (then the MTP
// layers', when speculation runs them, and a DFlash drafter's context K/V; they all share the
// block ids, so prefix caching, copy-on-write and preemption carry them alike): num_blocks
// blocks of block_size tokens ([NB, bs, nKV, D] per layer and K/V, plus the scale planes of a
// quantized --kv-dtype, ops/kv_cache.h). Which block holds what is the scheduler's business
// (scheduler/block_manager.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"

namespace ninfer::runtime {

class KvPool {
public:
    // activation: the compute dtype (the planes' dtype for KvDtype::Activation). Every code and
    // scale starts at zero (on ctx's device and stream).
    KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size,
           const ops::ExecContext& ctx, DType activation,
           ops::KvDtype kv_dtype = ops::KvDtype::Activation);

    int32_t block_size() const { return block_size_; }
    int64_t num_blocks() const { return num_blocks_; }
    ops::KvDtype kv_dtype() const { return kv_dtype_; }
    // Layers [0, attention_layers) are the model's; the MTP layers' follow.
    int64_t attention_layers() const { return attention_layers_; }
    // Bytes of one token's K and V (codes and scales) over every attention layer.
    static int64_t bytes_per_token(const model::CacheSpec& spec, DType activation,
                                   ops::KvDtype kv_dtype = ops::KvDtype::Activation);

    // Block dst = block src in every layer's K and V (codes and scales).
    void copy_block(const ops::ExecContext& ctx, int32_t src, int32_t dst) const;
    // Block b = 0 in every plane (codes, scales, the drafter's).
    void zero_block(const ops::ExecContext& ctx, int32_t b) const;

    int64_t bytes() const;
    const std::vector<ops::KvPlane>& k_views() const { return k_views_; }
    const std::vector<ops::KvPlane>& v_views() const { return v_views_; }
    // A DFlash drafter's planes: K of layer l at 2 l, V at 2 l + 1 (empty without one).
    const std::vector<TensorView>& draft_views() const { return draft_views_; }

private:
    int32_t block_size_;
    int64_t num_blocks_;
    int64_t attention_layers_;
    ops::KvDtype kv_dtype_;
    std::vector<Tensor> storage_;
    std::vector<ops::KvPlane> k_views_, v_views_;
    std::vector<TensorView> draft_views_;
};

} // namespace ninfer::runtime
