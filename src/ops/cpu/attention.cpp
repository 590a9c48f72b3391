// Implements ops/attention.h on the CPU: cache writes, and causal attention per (row, head) over
// the paged cache with a two-pass softmax (scores, then weighted values).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

// Address of (sequence s, position p, kv head h) in a [NB, bs, nKV, D] cache.
inline const float* cache_at(const TensorView& cache, const SeqBatch& b, int32_t s, int64_t p,
                             int64_t h) {
    int32_t block = b.host_block_table[int64_t(s) * b.block_table_stride + p / b.block_size];
    return cache.ptr<float>() + cache.offset(block, p % b.block_size, h);
}

template <typename Acc>
void attend_row(const TensorView& q, const TensorView& kc, const TensorView& vc, const SeqBatch& b,
                int32_t s, int64_t r, int64_t h, int64_t kvh, float scale, const TensorView& out,
                std::vector<Acc>& scores, std::vector<Acc>& acc) {
    const int64_t D = q.size(2);
    const int64_t p = b.host_pos_begin[s] + (r - b.host_row_begin[s]);
    const float* qr = q.ptr<float>() + q.offset(r, h);
    scores.resize(p + 1);
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    for (int64_t tau = 0; tau <= p; ++tau) {
        const float* kr = cache_at(kc, b, s, tau, kvh);
        Acc dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += Acc(qr[d]) * Acc(kr[d]);
        scores[tau] = dot * Acc(scale);
        max_score = std::max(max_score, scores[tau]);
    }
    Acc denom = 0;
    for (int64_t tau = 0; tau <= p; ++tau) denom += scores[tau] = std::exp(scores[tau] - max_score);
    acc.assign(D, Acc(0));
    for (int64_t tau = 0; tau <= p; ++tau) {
        const float* vr = cache_at(vc, b, s, tau, kvh);
        const Acc w = scores[tau] / denom;
        for (int64_t d = 0; d < D; ++d) acc[d] += w * Acc(vr[d]);
    }
    float* o = out.ptr<float>() + out.offset(r, h);
    for (int64_t d = 0; d < D; ++d) o[d] = float(acc[d]);
}

} // namespace

void kv_cache_write(CpuMode mode, const TensorView& k, const TensorView& v, const SeqBatch& b,
                    const TensorView& k_cache, const TensorView& v_cache) {
    const int64_t nKV = k.size(1), D = k.size(2);
    for (int32_t s = 0; s < b.num_seqs; ++s) {
        for (int64_t r = b.host_row_begin[s]; r < b.host_row_begin[s + 1]; ++r) {
            const int64_t p = b.host_pos_begin[s] + (r - b.host_row_begin[s]);
            for (int64_t h = 0; h < nKV; ++h) {
                std::memcpy(const_cast<float*>(cache_at(k_cache, b, s, p, h)),
                            k.ptr<float>() + k.offset(r, h), size_t(D) * sizeof(float));
                std::memcpy(const_cast<float*>(cache_at(v_cache, b, s, p, h)),
                            v.ptr<float>() + v.offset(r, h), size_t(D) * sizeof(float));
            }
        }
    }
}

void paged_attention(CpuMode mode, const TensorView& q, const TensorView& k_cache,
                     const TensorView& v_cache, const SeqBatch& b, float scale,
                     const TensorView& out) {
    const int64_t nH = q.size(1), nKV = k_cache.size(2), group = nH / nKV;
    // Row -> sequence lookup, then one task per (row, head).
    std::vector<int32_t> seq_of_row(b.num_rows);
    for (int32_t s = 0; s < b.num_seqs; ++s)
        for (int32_t r = b.host_row_begin[s]; r < b.host_row_begin[s + 1]; ++r) seq_of_row[r] = s;
    for_each_task(
        mode, int64_t(b.num_rows) * nH,
        [&](int64_t task) {
            const int64_t r = task / nH, h = task % nH;
            if (mode == CpuMode::Reference) {
                std::vector<double> scores, acc;
                attend_row<double>(q, k_cache, v_cache, b, seq_of_row[r], r, h, h / group, scale,
                                   out, scores, acc);
            } else {
                thread_local std::vector<float> scores, acc;
                attend_row<float>(q, k_cache, v_cache, b, seq_of_row[r], r, h, h / group, scale,
                                  out, scores, acc);
            }
        },
        int64_t(b.max_context) * q.size(2) * 2);
}

} // namespace ninfer::ops::cpu
