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

} // namespace ninfer::ops::cpu
