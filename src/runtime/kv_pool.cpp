#include "runtime/kv_pool.h"

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

KvPool::KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size, Device device,
               DType dtype)
    : block_size_(block_size), num_blocks_(num_blocks), attention_layers_(spec.attention_layers) {
    require(block_size > 0 && num_blocks > 0, "KvPool: block size and count must be positive");
    Allocator& a = ops::device_allocator(device);
    for (int64_t l = 0; l < spec.attention_layers + spec.mtp_layers; ++l) {
        k_.push_back(
            Tensor::empty(a, dtype, {num_blocks, block_size, spec.kv_heads, spec.head_dim}));
        v_.push_back(
            Tensor::empty(a, dtype, {num_blocks, block_size, spec.kv_heads, spec.head_dim}));
        k_views_.push_back(k_.back().view());
        v_views_.push_back(v_.back().view());
    }
}

int64_t KvPool::bytes_per_token(const model::CacheSpec& spec, DType dtype) {
    return 2 * (spec.attention_layers + spec.mtp_layers) * spec.kv_heads * spec.head_dim * dtype_size(dtype);
}

void KvPool::copy_block(const ops::ExecContext& ctx, int32_t src, int32_t dst) const {
    require(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_,
            "KvPool: copy of block ", src, " to ", dst, " outside [0, ", num_blocks_, ")");
    for (const auto* views : {&k_views_, &v_views_})
        for (const TensorView& v : *views) ops::copy(ctx, v.narrow(0, src, 1), v.narrow(0, dst, 1));
}

int64_t KvPool::bytes() const {
    int64_t n = 0;
    for (const auto& v : k_views_) n += v.nbytes();
    for (const auto& v : v_views_) n += v.nbytes();
    return n;
}

} // namespace ninfer::runtime
