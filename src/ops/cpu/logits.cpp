// Implements ops/logits.h on the CPU. Both modes sum exponentials in f64; Reference selects the
// top k by a full sort, Fast by partial sort, both in the CUDA kernels' total order of floats.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/logits.h"

namespace ninfer::ops::cpu {
namespace {

// The float's place in a total order (as the CUDA kernels rank, select.cuh): -NaN < -inf < ...
// < -0 < +0 < ... < +inf < +NaN. Comparing raw floats is no strict weak order once a NaN is in
// the row, and std::sort may then read out of bounds.
uint32_t order_key(float v) {
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

} // namespace

void logprobs_top_k(CpuMode mode, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs) {
    const int64_t R = logits.size(0), V = logits.size(1);
    const int64_t k = ids.empty() ? 0 : ids.size(1);
    for_each_row(mode, R, [&](int64_t r) {
        const float* l = row_f32(logits, r);
        double max_logit = -INFINITY;
        for (int64_t v = 0; v < V; ++v) max_logit = std::max(max_logit, double(l[v]));
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(l[v]) - max_logit);
        const float log_z = float(max_logit + std::log(sum)); // as stored (logits.h)
        lse.ptr<float>()[r] = log_z;
        if (k == 0) return;
        std::vector<int32_t> order(vocab_limit);
        std::iota(order.begin(), order.end(), 0);
        auto better = [&](int32_t a, int32_t b) {
            const uint32_t ka = order_key(l[a]), kb = order_key(l[b]);
            return ka > kb || (ka == kb && a < b);
        };
        if (mode == CpuMode::Reference)
            std::sort(order.begin(), order.end(), better);
        else
            std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
        for (int64_t i = 0; i < k; ++i) {
            ids.ptr<int32_t>()[r * ids.stride[0] + i] = order[i];
            logprobs.ptr<float>()[r * logprobs.stride[0] + i] = logprob_of(l[order[i]], log_z);
        }
    });
}

} // namespace ninfer::ops::cpu
