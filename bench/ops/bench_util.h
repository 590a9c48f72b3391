// Helpers shared by the op benchmarks (bench/ops): device tensors with deterministic random or
// given contents.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ops/kv_cache.h"
#include "ops/memory.h"

namespace ninfer::bench {

inline Tensor random_tensor(const ops::ExecContext& ctx, DType dt,
                            const std::vector<int64_t>& shape, uint64_t seed, float stddev = 1.0f) {
    Tensor t =
        Tensor::empty(ops::device_allocator(ctx.device), dt, shape.data(), int(shape.size()));
    ops::fill_random(ctx, t, seed, 0.0f, stddev);
    return t;
}

// An uninitialised quantized KV plane [NB, bs, nKV, D] of dtype kv (codes and scales), its
// tensors appended to keep (which owns them).
inline ops::KvPlane quantized_kv_plane(const ops::ExecContext& ctx, ops::KvDtype kv, int64_t NB,
                                       int64_t bs, int64_t nKV, int64_t D,
                                       std::vector<Tensor>& keep) {
    Allocator& a = ops::device_allocator(ctx.device);
    keep.push_back(Tensor::empty(a, ops::kv_code_dtype(kv, DType::BF16), {NB, bs, nKV, D}));
    keep.push_back(
        Tensor::empty(a, ops::kv_scale_dtype(kv), {NB, bs, nKV, ops::kv_scale_groups(kv, D)}));
    return ops::KvPlane::quantized(keep[keep.size() - 2], keep.back());
}

inline Tensor int_tensor(const ops::ExecContext& ctx, const std::vector<int32_t>& v) {
    Tensor t = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {int64_t(v.size())});
    ops::upload(ctx,
                TensorView::contiguous(const_cast<int32_t*>(v.data()), DType::I32, Device::cpu(),
                                       {int64_t(v.size())}),
                t);
    return t;
}

// Milliseconds per call of body: after one warm-up call, the median over reps of the mean of
// `inner` back-to-back calls (one synchronisation per `inner` calls, so that microsecond kernels
// are not timed as a host round trip each).
inline double time_ms(const ops::ExecContext& ctx, const std::function<void()>& body, int reps,
                      int inner = 1) {
    body();
    ops::synchronize(ctx);
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < inner; ++i) body();
        ops::synchronize(ctx);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count() /
            inner);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

} // namespace ninfer::bench
