// Implements ops/moe.h on the CPU. Reference: per token and selected expert, naive f64 loops.
// Fast: tokens grouped by expert, two sgemm calls per active expert, weighted scatter-add.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

// v rounded to bf16 (nearest even), as a float: the W8A8 emulation's GEMM rows, which CUDA's
// W8A8 route writes in bf16 (ops/cuda/moe_w8a8.h).
float as_bf16(double v) {
    return bf16_to_float(float_to_bf16(float(v)));
}

// ids: the chosen expert's id - first when it lies in [first, first + held), else -1.
template <typename Acc>
void route_row(const float* logits, int64_t E, int64_t top_k, int64_t first, int64_t held,
               float* weights, int32_t* ids) {
    Acc max_logit = logits[0];
    for (int64_t e = 1; e < E; ++e) max_logit = std::max(max_logit, Acc(logits[e]));
    std::vector<Acc> p(E);
    Acc sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(Acc(logits[e]) - max_logit);
    for (auto& v : p) v /= sum;
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    Acc top_sum = 0;
    for (int64_t j = 0; j < top_k; ++j) top_sum += p[order[j]];
    for (int64_t j = 0; j < top_k; ++j) {
        const int64_t local = order[j] - first;
        ids[j] = local >= 0 && local < held ? int32_t(local) : -1;
        weights[j] = float(p[order[j]] / top_sum);
    }
}

void experts_reference(const TensorView& x, const TensorView& gate_up, const TensorView& down,
                       const TensorView& ids, const TensorView& weights, const TensorView& y,
                       int64_t w8a8_in, int64_t w8a8_act) {
    const int64_t T = x.size(0), H = x.size(1), I = down.size(2), K = ids.size(1);
    std::vector<double> act(I);
    std::vector<float> xq(w8a8_in > 0 ? H : 0), aq(w8a8_act > 0 ? I : 0);
    for (int64_t t = 0; t < T; ++t) {
        const float* xr = row_f32(x, t);
        if (w8a8_in > 0) {
            std::copy_n(xr, H, xq.data());
            quantize_rows_e4m3(xq.data(), 1, H, H, w8a8_in);
            xr = xq.data();
        }
        std::vector<double> sum(H, 0.0);
        for (int64_t j = 0; j < K; ++j) {
            const int64_t e = ids.ptr<int32_t>()[t * ids.stride[0] + j];
            if (e < 0) continue; // another rank's expert
            const float* gu = gate_up.ptr<float>() + e * gate_up.stride[0];
            for (int64_t i = 0; i < I; ++i) {
                double g = 0, u = 0;
                for (int64_t c = 0; c < H; ++c) {
                    g += double(gu[i * H + c]) * xr[c];
                    u += double(gu[(I + i) * H + c]) * xr[c];
                }
                if (w8a8_act > 0) g = as_bf16(g), u = as_bf16(u); // the route's bf16 gate/up row
                act[i] = silu(g) * u;
            }
            if (w8a8_act > 0) { // the route's f32 SwiGLU row, quantized
                for (int64_t i = 0; i < I; ++i) aq[i] = float(act[i]);
                quantize_rows_e4m3(aq.data(), 1, I, I, w8a8_act);
                for (int64_t i = 0; i < I; ++i) act[i] = aq[i];
            }
            const float* dn = down.ptr<float>() + e * down.stride[0];
            const double w = weights.ptr<float>()[t * weights.stride[0] + j];
            for (int64_t c = 0; c < H; ++c) {
                double o = 0;
                for (int64_t i = 0; i < I; ++i) o += double(dn[c * I + i]) * act[i];
                sum[c] += w * (w8a8_act > 0 ? as_bf16(o) : o); // the route's bf16 down row
            }
        }
        float* yr = row_f32(y, t);
        for (int64_t c = 0; c < H; ++c) yr[c] = float(double(yr[c]) + sum[c]);
    }
}

void experts_fast(const TensorView& x, const TensorView& gate_up, const TensorView& down,
                  const TensorView& ids, const TensorView& weights, const TensorView& y,
                  int64_t w8a8_in, int64_t w8a8_act) {
    const int64_t T = x.size(0), H = x.size(1), E = gate_up.size(0), I = down.size(2);
    const int64_t K = ids.size(1);
    // Bucket (token, slot) pairs by expert.
    std::vector<std::vector<int64_t>> assigned(E);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < K; ++j) {
            const int32_t e = ids.ptr<int32_t>()[t * ids.stride[0] + j];
            if (e >= 0) assigned[size_t(e)].push_back(t * K + j); // -1: another rank's expert
        }
    std::vector<float> xs, hidden, act, outs;
    for (int64_t e = 0; e < E; ++e) {
        const auto& pairs = assigned[e];
        const int64_t n = int64_t(pairs.size());
        if (n == 0) continue;
        xs.resize(n * H);
        hidden.resize(n * 2 * I);
        act.resize(n * I);
        outs.resize(n * H);
        for (int64_t i = 0; i < n; ++i) std::copy_n(row_f32(x, pairs[i] / K), H, &xs[i * H]);
        if (w8a8_in > 0) quantize_rows_e4m3(xs.data(), n, H, H, w8a8_in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(2 * I), int(H), 1.0f,
                    xs.data(), int(H), gate_up.ptr<float>() + e * gate_up.stride[0], int(H), 0.0f,
                    hidden.data(), int(2 * I));
        if (w8a8_act > 0) // the route's bf16 gate/up rows
            for (float& v : hidden) v = as_bf16(v);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t c = 0; c < I; ++c)
                act[i * I + c] = silu(hidden[i * 2 * I + c]) * hidden[i * 2 * I + I + c];
        if (w8a8_act > 0) quantize_rows_e4m3(act.data(), n, I, I, w8a8_act);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(H), int(I), 1.0f,
                    act.data(), int(I), down.ptr<float>() + e * down.stride[0], int(I), 0.0f,
                    outs.data(), int(H));
        if (w8a8_act > 0) // the route's bf16 down rows
            for (float& v : outs) v = as_bf16(v);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t t = pairs[i] / K, j = pairs[i] % K;
            const float w = weights.ptr<float>()[t * weights.stride[0] + j];
            float* yr = row_f32(y, t);
            for (int64_t c = 0; c < H; ++c) yr[c] += w * outs[i * H + c];
        }
    }
}

} // namespace

void moe_route(CpuMode mode, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, int64_t first, int64_t held) {
    const int64_t T = router_logits.size(0), E = router_logits.size(1);
    for_each_row(mode, T, [&](int64_t t) {
        float* w = row_f32(weights, t);
        int32_t* id = ids.ptr<int32_t>() + t * ids.stride[0];
        if (mode == CpuMode::Reference)
            route_row<double>(row_f32(router_logits, t), E, top_k, first, held, w, id);
        else
            route_row<float>(row_f32(router_logits, t), E, top_k, first, held, w, id);
    });
}

void moe_experts(CpuMode mode, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y, int64_t w8a8_in, int64_t w8a8_act) {
    if (mode == CpuMode::Reference)
        experts_reference(x, gate_up, down, ids, weights, y, w8a8_in, w8a8_act);
    else
        experts_fast(x, gate_up, down, ids, weights, y, w8a8_in, w8a8_act);
}

void add_sigmoid_scaled(CpuMode mode, const TensorView& gate_logit, const TensorView& shared,
                        const TensorView& y) {
    const int64_t T = y.size(0), H = y.size(1);
    for_each_row(mode, T, [&](int64_t t) {
        const float* s = row_f32(shared, t);
        float* yr = row_f32(y, t);
        if (mode == CpuMode::Reference) {
            const double gate = sigmoid(double(row_f32(gate_logit, t)[0]));
            for (int64_t c = 0; c < H; ++c) yr[c] = float(double(yr[c]) + gate * s[c]);
        } else {
            const float gate = sigmoid(row_f32(gate_logit, t)[0]);
            for (int64_t c = 0; c < H; ++c) yr[c] += gate * s[c];
        }
    });
}

} // namespace ninfer::ops::cpu
