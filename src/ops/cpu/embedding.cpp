// Implements ops/embedding.h on the CPU. Both modes copy rows; Fast copies in parallel.
#include <cstring>

#include "core/error.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {

void embedding(CpuMode mode, const TensorView& ids, const TensorView& table,
               const TensorView& out) {
    const int64_t T = ids.size(0), V = table.size(0), H = table.size(1);
    const int32_t* id = ids.ptr<int32_t>();
    for (int64_t t = 0; t < T; ++t)
        require(id[t] >= 0 && id[t] < V, "embedding: token id ", id[t], " outside [0, ", V, ")");
    for_each_row(mode, T, [&](int64_t t) {
        std::memcpy(row_f32(out, t), row_f32(table, id[t]), size_t(H) * sizeof(float));
    });
}

void embedding_bag_add(CpuMode mode, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out) {
    const int64_t T = indices.size(0), n = indices.size(1), V = table.size(0), H = table.size(1);
    const int32_t* idx = indices.ptr<int32_t>();
    const float* w = weights.ptr<float>();
    for (int64_t i = 0; i < T * n; ++i)
        require(idx[i] >= 0 && idx[i] < V, "embedding_bag_add: index ", idx[i], " outside [0, ",
                V, ")");
    auto rows = [&](auto acc_tag) {
        using Acc = decltype(acc_tag);
        for_each_row(mode, T, [&](int64_t t) {
            float* dst = row_f32(out, t);
            for (int64_t h = 0; h < H; ++h) {
                Acc sum = 0;
                for (int64_t j = 0; j < n; ++j)
                    sum += Acc(w[t * n + j]) * Acc(row_f32(table, idx[t * n + j])[h]);
                dst[h] = float(Acc(dst[h]) + Acc(float(sum)));
            }
        }, H * n);
    };
    if (mode == CpuMode::Reference)
        rows(double{});
    else
        rows(float{});
}

} // namespace ninfer::ops::cpu
