#include "runtime/kv_pool.h"

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

KvPool::KvPool(const model::CacheSpec& spec, int64_t num_blocks, int32_t block_size,
               const ops::ExecContext& ctx, DType activation, ops::KvDtype kv_dtype)
    : block_size_(block_size), num_blocks_(num_blocks), attention_layers_(spec.attention_layers),
      kv_dtype_(kv_dtype) {
    require(block_size > 0 && num_blocks > 0, "KvPool: block size and count must be positive");
    Allocator& a = ops::device_allocator(ctx.device);
    const DType codes = ops::kv_code_dtype(kv_dtype, activation);
    const int64_t groups = ops::kv_scale_groups(kv_dtype, spec.head_dim);
    auto plane = [&] {
        storage_.push_back(
            Tensor::empty(a, codes, {num_blocks, block_size, spec.kv_heads, spec.head_dim}));
        ops::KvPlane p(storage_.back().view());
        if (kv_dtype == ops::KvDtype::Activation) return p;
        storage_.push_back(Tensor::empty(a, ops::kv_scale_dtype(kv_dtype),
                                         {num_blocks, block_size, spec.kv_heads, groups}));
        p.scale = storage_.back().view();
        return p;
    };
    for (int64_t l = 0; l < spec.attention_layers + spec.mtp_layers; ++l) {
        k_views_.push_back(plane());
        v_views_.push_back(plane());
    }
    // A DFlash drafter's planes: the activation dtype and the drafter's own head shape.
    for (int64_t l = 0; l < 2 * spec.draft_layers; ++l) {
        storage_.push_back(Tensor::empty(
            a, activation, {num_blocks, block_size, spec.draft_kv_heads, spec.draft_head_dim}));
        draft_views_.push_back(storage_.back().view());
    }
    // Attention reads a block's rows past its sequence's context (masked, but multiplied: cuDNN's
    // SDPA and the flash kernels compute P V over whole key tiles, and 0 x NaN is NaN), so they
    // must hold finite values: device memory comes back holding whatever the pool's last user
    // left (the bf16 35B at a 65,536-row step budget found NaN there after the profile
    // forward's f32 scratch and stopped 45% of its requests). Zeros at the start, and a failed
    // sequence's blocks zeroed as they are freed (Scheduler::finish, zero_block), keep every
    // unwritten row finite. (CPU allocations come zero-filled, and pages never touched cost no
    // memory.)
    if (!ctx.device.is_cpu())
        for (const Tensor& t : storage_) ops::fill_zero(ctx, t.view());
}

int64_t KvPool::bytes_per_token(const model::CacheSpec& spec, DType activation,
                                ops::KvDtype kv_dtype) {
    return 2 * (spec.attention_layers + spec.mtp_layers) * spec.kv_heads *
               ops::kv_row_bytes(kv_dtype, activation, spec.head_dim) +
           2 * spec.draft_layers * spec.draft_kv_heads * spec.draft_head_dim *
               int64_t(dtype_size(activation));
}

void KvPool::copy_block(const ops::ExecContext& ctx, int32_t src, int32_t dst) const {
    require(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_,
            "KvPool: copy of block ", src, " to ", dst, " outside [0, ", num_blocks_, ")");
    for (const auto* views : {&k_views_, &v_views_})
        for (const ops::KvPlane& p : *views) {
            ops::copy(ctx, p.data.narrow(0, src, 1), p.data.narrow(0, dst, 1));
            if (p.quantized()) ops::copy(ctx, p.scale.narrow(0, src, 1), p.scale.narrow(0, dst, 1));
        }
    for (const TensorView& p : draft_views_)
        ops::copy(ctx, p.narrow(0, src, 1), p.narrow(0, dst, 1));
}

void KvPool::zero_block(const ops::ExecContext& ctx, int32_t b) const {
    require(b >= 0 && b < num_blocks_, "KvPool: zeroing block ", b, " outside [0, ", num_blocks_,
            ")");
    for (const Tensor& t : storage_) ops::fill_zero(ctx, t.view().narrow(0, b, 1));
}

int64_t KvPool::bytes() const {
    int64_t n = 0;
    for (const auto* views : {&k_views_, &v_views_})
        for (const ops::KvPlane& p : *views) n += p.nbytes();
    for (const TensorView& p : draft_views_) n += p.nbytes();
    return n;
}

} // namespace ninfer::runtime
