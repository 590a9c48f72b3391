// Implements ops/span_attention.h on the CPU: one task per (row, query head), a two-pass softmax
// over the row's span (scores, then weighted values), keys and values read through the block
// table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/dflash_ops.h"

namespace ninfer::ops::cpu {
namespace {

// Key position tau of table row t in a [NB, bs, nKV, D] cache: the D values of KV head kvh.
struct PagedRows {
    const float* data;
    const int32_t* table; // the table row's block ids
    int64_t bs, nKV, D;
    const float* at(int64_t tau, int64_t kvh) const {
        const int64_t block = table[tau / bs];
        return data + ((block * bs + tau % bs) * nKV + kvh) * D;
    }
};

template <typename Acc>
void attend(const float* qr, const PagedRows& k, const PagedRows& v, int64_t kvh, int64_t begin,
            int64_t end, float scale, float* o, std::vector<Acc>& scores, std::vector<Acc>& acc) {
    const int64_t D = k.D;
    scores.resize(size_t(end - begin));
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    for (int64_t tau = begin; tau < end; ++tau) {
        const float* kr = k.at(tau, kvh);
        Acc dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += Acc(qr[d]) * Acc(kr[d]);
        scores[tau - begin] = dot * Acc(scale);
        max_score = std::max(max_score, scores[tau - begin]);
    }
    Acc denom = 0;
    for (Acc& s : scores) denom += s = std::exp(s - max_score);
    acc.assign(size_t(D), Acc(0));
    for (int64_t tau = begin; tau < end; ++tau) {
        const float* vr = v.at(tau, kvh);
        const Acc w = scores[tau - begin] / denom;
        for (int64_t d = 0; d < D; ++d) acc[d] += w * Acc(vr[d]);
    }
    for (int64_t d = 0; d < D; ++d) o[d] = float(acc[d]);
}

} // namespace

void span_attention(CpuMode mode, const TensorView& q, const TensorView& k_cache,
                    const TensorView& v_cache, const SpanBatch& spans, float scale,
                    const TensorView& out) {
    const int64_t R = q.size(0), nH = q.size(1), D = q.size(2);
    const int64_t bs = k_cache.size(1), nKV = k_cache.size(2), group = nH / nKV;
    int64_t longest = 0;
    for (int64_t r = 0; r < R; ++r)
        longest = std::max<int64_t>(longest, spans.host_key_end[r] - spans.host_key_begin[r]);
    auto task = [&](int64_t i) {
        const int64_t r = i / nH, h = i % nH;
        const int32_t* table =
            spans.host_block_table + int64_t(spans.host_table_row[r]) * spans.block_table_stride;
        const PagedRows k{k_cache.ptr<float>(), table, bs, nKV, D};
        const PagedRows v{v_cache.ptr<float>(), table, bs, nKV, D};
        const float* qr = q.ptr<float>() + q.offset(r, h);
        float* o = out.ptr<float>() + out.offset(r, h);
        const int64_t begin = spans.host_key_begin[r], end = spans.host_key_end[r];
        if (mode == CpuMode::Reference) {
            thread_local std::vector<double> scores, acc;
            attend<double>(qr, k, v, h / group, begin, end, scale, o, scores, acc);
        } else {
            thread_local std::vector<float> scores, acc;
            attend<float>(qr, k, v, h / group, begin, end, scale, o, scores, acc);
        }
    };
    for_each_task(mode, R * nH, task, 2 * longest * D);
}

} // namespace ninfer::ops::cpu
