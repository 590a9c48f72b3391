// Implements ops/segment_attention.h on the CPU: one task per (row, head), a two-pass softmax
// over the row's segment (scores, then weighted values).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/vision_ops.h"

namespace ninfer::ops::cpu {
namespace {

template <typename Acc>
void attend(const TensorView& q, const TensorView& k, const TensorView& v, int64_t r, int64_t h,
            int64_t u0, int64_t u1, float scale, const TensorView& out, std::vector<Acc>& scores,
            std::vector<Acc>& acc) {
    const int64_t D = q.size(2);
    const float* qr = q.ptr<float>() + q.offset(r, h);
    scores.resize(size_t(u1 - u0));
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    for (int64_t u = u0; u < u1; ++u) {
        const float* kr = k.ptr<float>() + k.offset(u, h);
        Acc dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += Acc(qr[d]) * Acc(kr[d]);
        scores[u - u0] = dot * Acc(scale);
        max_score = std::max(max_score, scores[u - u0]);
    }
    Acc denom = 0;
    for (Acc& s : scores) denom += s = std::exp(s - max_score);
    acc.assign(size_t(D), Acc(0));
    for (int64_t u = u0; u < u1; ++u) {
        const float* vr = v.ptr<float>() + v.offset(u, h);
        const Acc w = scores[u - u0] / denom;
        for (int64_t d = 0; d < D; ++d) acc[d] += w * Acc(vr[d]);
    }
    float* o = out.ptr<float>() + out.offset(r, h);
    for (int64_t d = 0; d < D; ++d) o[d] = float(acc[d]);
}

} // namespace

void segment_attention(CpuMode mode, const TensorView& q, const TensorView& k, const TensorView& v,
                       const int32_t* segments, int64_t num_segments, float scale,
                       const TensorView& out) {
    const int64_t T = q.size(0), nH = q.size(1), D = q.size(2);
    if (T == 0 || nH == 0) return;
    std::vector<int32_t> seg_of_row(static_cast<size_t>(T));
    int64_t longest = 0;
    for (int64_t s = 0; s < num_segments; ++s) {
        longest = std::max<int64_t>(longest, segments[s + 1] - segments[s]);
        for (int32_t r = segments[s]; r < segments[s + 1]; ++r) seg_of_row[r] = int32_t(s);
    }
    const int64_t tasks = T * nH;
    auto task = [&](int64_t i) {
        const int64_t r = i / nH, h = i % nH, s = seg_of_row[r];
        if (mode == CpuMode::Reference) {
            thread_local std::vector<double> scores, acc;
            attend<double>(q, k, v, r, h, segments[s], segments[s + 1], scale, out, scores, acc);
        } else {
            thread_local std::vector<float> scores, acc;
            attend<float>(q, k, v, r, h, segments[s], segments[s + 1], scale, out, scores, acc);
        }
    };
    // Threads in both modes: the (row, head) tasks are independent, so the reference result does
    // not depend on them, and the oracle stays usable at a real image's 4096 rows.
    if (tasks * longest * D < kMinParallelWork) {
        for (int64_t i = 0; i < tasks; ++i) task(i);
        return;
    }
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < tasks; ++i) task(i);
}

} // namespace ninfer::ops::cpu
