// Helpers shared by the CPU op bodies: row access and an OpenMP row loop.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cpu {

// Row r of an f32 "row view": [R, N], or [A, B, N] read as R = A * B rows (row r = (r / B, r % B)).
// The last dim is contiguous; other strides are free.
inline float* row_f32(const TensorView& t, int64_t r) {
    if (t.ndim == 3)
        return t.ptr<float>() + (r / t.shape[1]) * t.stride[0] + (r % t.shape[1]) * t.stride[1];
    return t.ptr<float>() + r * t.stride[0];
}
// Number of rows of a row view.
inline int64_t row_count(const TensorView& t) {
    return t.ndim == 3 ? t.shape[0] * t.shape[1] : t.shape[0];
}
inline int64_t row_width(const TensorView& t) {
    return t.shape[t.ndim - 1];
}

// Below this much work (about multiply-adds) a loop runs on the calling thread: waking an OpenMP
// team costs more than it saves (tiny models decode several times faster serially).
constexpr int64_t kMinParallelWork = int64_t(1) << 17;

// Runs body(i) for i in [0, n); Fast mode spreads the iterations over OpenMP threads when the
// loop holds enough work (n * work_per_item).
template <typename Body>
void for_each_row(CpuMode mode, int64_t n, Body&& body, int64_t work_per_item = 1024) {
    if (mode == CpuMode::Reference || n < 2 || n * work_per_item < kMinParallelWork) {
        for (int64_t i = 0; i < n; ++i) body(i);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
}

// Same, with dynamic scheduling for uneven iterations (attention rows, GDN heads).
template <typename Body>
void for_each_task(CpuMode mode, int64_t n, Body&& body, int64_t work_per_item) {
    if (mode == CpuMode::Reference || n < 2 || n * work_per_item < kMinParallelWork) {
        for (int64_t i = 0; i < n; ++i) body(i);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) body(i);
}

template <typename Acc> inline Acc sigmoid(Acc x) {
    return Acc(1) / (Acc(1) + std::exp(-x));
}
template <typename Acc> inline Acc silu(Acc x) {
    return x / (Acc(1) + std::exp(-x));
}

} // namespace ninfer::ops::cpu
