#include "runtime/state_pool.h"

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

StatePool::StatePool(const model::CacheSpec& spec, int32_t slots, Device device, DType conv_dtype) {
    require(slots > 0, "StatePool: need at least one slot");
    Allocator& a = ops::device_allocator(device);
    for (int64_t l = 0; l < spec.gdn_layers; ++l) {
        conv_.push_back(
            Tensor::empty(a, conv_dtype, {slots, spec.conv_channels, spec.conv_history}));
        recurrent_.push_back(Tensor::empty(
            a, DType::F32, {slots, spec.value_heads, spec.key_head_dim, spec.value_head_dim}));
        conv_views_.push_back(conv_.back().view());
        recurrent_views_.push_back(recurrent_.back().view());
    }
    in_use_.assign(size_t(slots), false);
}

int64_t StatePool::bytes() const {
    int64_t n = 0;
    for (const auto& v : conv_views_) n += v.nbytes();
    for (const auto& v : recurrent_views_) n += v.nbytes();
    return n;
}

int32_t StatePool::free_slots() const {
    int32_t n = 0;
    for (bool used : in_use_) n += !used;
    return n;
}

int32_t StatePool::acquire(const ops::ExecContext& ctx) {
    for (size_t s = 0; s < in_use_.size(); ++s) {
        if (in_use_[s]) continue;
        in_use_[s] = true;
        for (const TensorView& v : conv_views_) ops::fill_zero(ctx, v.narrow(0, int64_t(s), 1));
        for (const TensorView& v : recurrent_views_)
            ops::fill_zero(ctx, v.narrow(0, int64_t(s), 1));
        return int32_t(s);
    }
    fail(ErrorCategory::OutOfMemory, "no free GDN state slot (", in_use_.size(), " in use)");
}

void StatePool::release(int32_t slot) {
    require(slot >= 0 && slot < num_slots() && in_use_[size_t(slot)],
            "StatePool: release of a free slot ", slot);
    in_use_[size_t(slot)] = false;
}

} // namespace ninfer::runtime
