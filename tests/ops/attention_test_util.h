// Shared by the attention op tests: a paged cache with history, this call's rows, and a naive
// FP64 causal attention over the un-paged K/V.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/op_test_util.h"

namespace ninfer::test {

constexpr int32_t kBlock = 16;

struct AttnDims {
    int64_t nH, nKV, D;
};

// A batch whose sequences hold their whole K/V un-paged (for the naive attention), the paged
// cache with the history [0, pos_begin) already written, and this call's k, v, q rows.
struct AttnSetup {
    AttnDims d;
    std::vector<SeqSpec> seqs;
    std::vector<Tensor> k_full, v_full; // per sequence [context, nKV, D]
    Tensor k_cache, v_cache;            // [NB, bs, nKV, D], NaN where nothing was written
    Tensor q, k, v;                     // this call's rows
};

// Gives each sequence the blocks it needs, taken from a shuffled pool of num_blocks ids, so
// tables are neither contiguous nor increasing; sequence 0 gets its blocks in reversed order.
inline std::vector<SeqSpec> with_blocks(std::vector<SeqSpec> seqs, int32_t num_blocks, uint64_t seed) {
    std::vector<int32_t> pool(static_cast<size_t>(num_blocks), 0);
    for (int32_t i = 0; i < num_blocks; ++i) pool[size_t(i)] = i;
    std::mt19937_64 gen(seed);
    std::shuffle(pool.begin(), pool.end(), gen);
    size_t next = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
        const int32_t needed = (seqs[s].pos_begin + seqs[s].rows + kBlock - 1) / kBlock;
        seqs[s].blocks.clear();
        for (int32_t i = 0; i < needed; ++i) seqs[s].blocks.push_back(pool.at(next++));
        if (s == 0) std::sort(seqs[s].blocks.begin(), seqs[s].blocks.end(), std::greater<>());
    }
    return seqs;
}

inline AttnSetup make_setup(AttnDims d, const std::vector<SeqSpec>& seqs_in, int32_t num_blocks,
                     uint64_t seed) {
    AttnSetup a{d, with_blocks(seqs_in, num_blocks, seed), {}, {}, {}, {}, {}, {}, {}};
    int64_t T = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s) {
        const int64_t context = a.seqs[s].pos_begin + a.seqs[s].rows;
        a.k_full.push_back(random_tensor({context, d.nKV, d.D}, seed + 10 * s + 1));
        a.v_full.push_back(random_tensor({context, d.nKV, d.D}, seed + 10 * s + 2));
        T += a.seqs[s].rows;
    }
    a.k_cache = zeros({num_blocks, kBlock, d.nKV, d.D});
    a.v_cache = zeros({num_blocks, kBlock, d.nKV, d.D});
    fill_nan(a.k_cache);
    fill_nan(a.v_cache);
    // History: one write per sequence of its positions [0, pos_begin).
    for (size_t s = 0; s < a.seqs.size(); ++s) {
        const int32_t n = a.seqs[s].pos_begin;
        if (n == 0) continue;
        HostBatch history({{n, 0, 0, a.seqs[s].blocks}}, kBlock);
        ops::kv_cache_write(kRef, rows(a.k_full[s], 0, n), rows(a.v_full[s], 0, n), history,
                            a.k_cache, a.v_cache);
    }
    a.q = random_tensor({T, d.nH, d.D}, seed + 5);
    a.k = zeros({T, d.nKV, d.D});
    a.v = zeros({T, d.nKV, d.D});
    const int64_t row = d.nKV * d.D;
    int64_t r = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s)
        for (int64_t i = 0; i < a.seqs[s].rows; ++i, ++r) {
            const int64_t p = a.seqs[s].pos_begin + i;
            std::copy_n(a.k_full[s].ptr<float>() + p * row, row, a.k.ptr<float>() + r * row);
            std::copy_n(a.v_full[s].ptr<float>() + p * row, row, a.v.ptr<float>() + r * row);
        }
    return a;
}

// softmax_{tau <= p}(scale q . K_tau) V_tau in FP64 over the un-paged K/V of each sequence.
inline Tensor naive_attention(const AttnSetup& a, float scale) {
    const AttnDims d = a.d;
    Tensor out = zeros({a.q.size(0), d.nH, d.D});
    int64_t r = 0;
    for (size_t s = 0; s < a.seqs.size(); ++s)
        for (int64_t i = 0; i < a.seqs[s].rows; ++i, ++r) {
            const int64_t p = a.seqs[s].pos_begin + i;
            for (int64_t h = 0; h < d.nH; ++h) {
                const int64_t kvh = h / (d.nH / d.nKV);
                const float* q = a.q.ptr<float>() + (r * d.nH + h) * d.D;
                std::vector<double> w(static_cast<size_t>(p + 1), 0.0);
                double max_score = -INFINITY, denom = 0;
                for (int64_t tau = 0; tau <= p; ++tau) {
                    const float* k = a.k_full[s].ptr<float>() + (tau * d.nKV + kvh) * d.D;
                    double dot = 0;
                    for (int64_t j = 0; j < d.D; ++j) dot += double(q[j]) * k[j];
                    w[size_t(tau)] = dot * scale;
                    max_score = std::max(max_score, w[size_t(tau)]);
                }
                for (double& x : w) denom += x = std::exp(x - max_score);
                float* o = out.ptr<float>() + (r * d.nH + h) * d.D;
                for (int64_t j = 0; j < d.D; ++j) {
                    double acc = 0;
                    for (int64_t tau = 0; tau <= p; ++tau)
                        acc += w[size_t(tau)] / denom *
                               a.v_full[s].ptr<float>()[(tau * d.nKV + kvh) * d.D + j];
                    o[j] = float(acc);
                }
            }
        }
    return out;
}

} // namespace ninfer::test
