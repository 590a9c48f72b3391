// StatePool: GDN conv and recurrent state for every GDN layer, one slot per resident sequence.
// A slot is zeroed when acquired, so a new sequence starts from the empty state.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

class StatePool {
public:
    StatePool(const model::CacheSpec& spec, int32_t slots, Device device, DType conv_dtype);

    int32_t num_slots() const { return int32_t(in_use_.size()); }
    int32_t free_slots() const;
    // A free slot, zeroed; raises OutOfMemory when none is free.
    int32_t acquire(const ops::ExecContext& ctx);
    void release(int32_t slot);

    int64_t bytes() const;
    const std::vector<TensorView>& conv_views() const { return conv_views_; }
    const std::vector<TensorView>& recurrent_views() const { return recurrent_views_; }

private:
    std::vector<Tensor> conv_, recurrent_;
    std::vector<TensorView> conv_views_, recurrent_views_;
    std::vector<bool> in_use_;
};

} // namespace ninfer::runtime
