// Helpers shared by the op benchmarks (bench/ops): device tensors with deterministic random or
// given contents.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/memory.h"

namespace ninfer::bench {

inline Tensor random_tensor(const ops::ExecContext& ctx, DType dt,
                            const std::vector<int64_t>& shape, uint64_t seed, float stddev = 1.0f) {
    Tensor t =
        Tensor::empty(ops::device_allocator(ctx.device), dt, shape.data(), int(shape.size()));
    ops::fill_random(ctx, t, seed, 0.0f, stddev);
    return t;
}

inline Tensor int_tensor(const ops::ExecContext& ctx, const std::vector<int32_t>& v) {
    Tensor t = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {int64_t(v.size())});
    ops::upload(ctx,
                TensorView::contiguous(const_cast<int32_t*>(v.data()), DType::I32, Device::cpu(),
                                       {int64_t(v.size())}),
                t);
    return t;
}

} // namespace ninfer::bench
