// Implements ops/dflash.h on the CPU. grouped_dynamic_conv: one task per row, its channels in
// order. dflash_select: one task per sequence, its K positions in order (each depends on the
// previous choice), the k candidate scores as dot products with the predecessor-weighted gate.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/dflash_ops.h"

namespace ninfer::ops::cpu {
namespace {

// Row t of a segment starting at row t0: the taps o <= t - t0 that stay inside the segment.
template <typename Acc>
void conv_row(const TensorView& x, const TensorView& dynamic, const TensorView& base,
              int64_t group_size, int64_t t, int64_t t0, const TensorView& out) {
    const int64_t H = x.size(1), taps = std::min(base.size(0), t - t0 + 1);
    const int64_t G = H / group_size;
    const float* dyn = dynamic.ptr<float>() + t * dynamic.stride[0]; // [taps * G]
    float* o = out.ptr<float>() + t * out.stride[0];
    for (int64_t c = 0; c < H; ++c) {
        const int64_t g = c / group_size;
        Acc sum = 0;
        for (int64_t tap = 0; tap < taps; ++tap) {
            const Acc w = Acc(base.ptr<float>()[tap * H + c]) + Acc(dyn[tap * G + g]);
            sum += w * Acc(x.ptr<float>()[(t - tap) * x.stride[0] + c]);
        }
        o[c] = float(sum);
    }
}

// The inputs of one sequence's walk (b fixed): views into the op's tensors.
struct Walk {
    const float* unary;  // [K, k]
    const int32_t* cand; // [K, k]
    const float* g;      // [K, R]
    const float* P;      // [V, R]
    const float* S;      // [V, R]
    const float* u;      // [K], or null (greedy)
    int64_t K, k, R;
};

// The lowest c with the largest e[c] (NaN never wins: comparisons with it are false).
template <typename Acc> int64_t argmax(const std::vector<Acc>& e) {
    int64_t best = 0;
    for (int64_t c = 1; c < int64_t(e.size()); ++c)
        if (e[c] > e[best]) best = c;
    return best;
}

// Writes q's row for the chosen distribution and returns j.
template <typename Acc>
int64_t choose(const std::vector<Acc>& e, float temperature, const float* u, float* q) {
    const int64_t k = int64_t(e.size());
    if (!u) { // greedy: one-hot at the argmax
        const int64_t j = argmax(e);
        for (int64_t c = 0; c < k; ++c) q[c] = c == j ? 1.0f : 0.0f;
        return j;
    }
    const Acc temp = Acc(temperature);
    Acc max_e = -std::numeric_limits<Acc>::infinity();
    for (Acc v : e) max_e = std::max(max_e, v / temp);
    std::vector<Acc> p(static_cast<size_t>(k));
    Acc sum = 0;
    for (int64_t c = 0; c < k; ++c) sum += p[c] = std::exp(e[c] / temp - max_e);
    // The first c whose inclusive prefix sum of q exceeds u (k - 1 when none does).
    int64_t j = k - 1;
    Acc prefix = 0;
    for (int64_t c = 0; c < k; ++c) {
        p[c] /= sum;
        q[c] = float(p[c]);
        prefix += p[c];
        if (j == k - 1 && c < k - 1 && prefix > Acc(*u)) j = c;
    }
    return j;
}

template <typename Acc>
void walk(const Walk& w, int32_t anchor, float temperature, int32_t* path, float* q) {
    std::vector<Acc> gated(size_t(w.R)), e(size_t(w.k));
    int64_t pred = anchor;
    for (int64_t i = 0; i < w.K; ++i) {
        // gated[r] = P[pred, r] * g[i, r]: shared by the k candidates of position i.
        const float* p_row = w.P + pred * w.R;
        for (int64_t r = 0; r < w.R; ++r) gated[r] = Acc(p_row[r]) * Acc(w.g[i * w.R + r]);
        for (int64_t c = 0; c < w.k; ++c) {
            const float* s_row = w.S + int64_t(w.cand[i * w.k + c]) * w.R;
            Acc dot = 0;
            for (int64_t r = 0; r < w.R; ++r) dot += gated[r] * Acc(s_row[r]);
            e[c] = Acc(w.unary[i * w.k + c]) + dot;
        }
        const int64_t j = choose(e, temperature, w.u ? w.u + i : nullptr, q + i * w.k);
        path[i] = w.cand[i * w.k + j];
        pred = path[i];
    }
}

} // namespace

void grouped_dynamic_conv(CpuMode mode, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size, const int32_t* segments,
                          int64_t num_segments, const TensorView& out) {
    const int64_t T = x.size(0), H = x.size(1);
    std::vector<int32_t> first_row(static_cast<size_t>(T)); // the first row of each row's segment
    for (int64_t s = 0; s < num_segments; ++s)
        for (int32_t t = segments[s]; t < segments[s + 1]; ++t) first_row[t] = segments[s];
    for_each_row(
        mode, T,
        [&](int64_t t) {
            if (mode == CpuMode::Reference)
                conv_row<double>(x, dynamic, base, group_size, t, first_row[t], out);
            else
                conv_row<float>(x, dynamic, base, group_size, t, first_row[t], out);
        },
        H * base.size(0));
}

void dflash_select(CpuMode mode, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q) {
    const int64_t B = unary.size(0), K = unary.size(1), k = unary.size(2), R = g.size(2);
    const bool sampling = temperature > 0.0f;
    for_each_task(
        mode, B,
        [&](int64_t b) {
            const Walk w{unary.ptr<float>() + b * K * k,
                         cand.ptr<int32_t>() + b * K * k,
                         g.ptr<float>() + b * K * R,
                         P.ptr<float>(),
                         S.ptr<float>(),
                         sampling ? u.ptr<float>() + b * K : nullptr,
                         K,
                         k,
                         R};
            int32_t* path_b = path.ptr<int32_t>() + b * K;
            float* q_b = q.ptr<float>() + b * K * k;
            const int32_t a = anchor.ptr<int32_t>()[b];
            if (mode == CpuMode::Reference)
                walk<double>(w, a, temperature, path_b, q_b);
            else
                walk<float>(w, a, temperature, path_b, q_b);
        },
        K * k * R);
}

} // namespace ninfer::ops::cpu
