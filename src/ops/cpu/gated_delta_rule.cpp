// Implements ops/gated_delta_rule.h on the CPU: the gates, the token recurrence and the chunked
// (UT-transform) form. Both forms are templated on the accumulator: f64 in Reference mode.
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

// Chunk length of the UT form (HF uses 64; any length is exact in exact arithmetic).
constexpr int64_t kChunk = 64;
// Below this many rows a sequence uses the recurrence in Auto mode.
constexpr int64_t kChunkedMinRows = 8;

template <typename Acc> Acc softplus(Acc u) {
    return u > Acc(20) ? u : std::log1p(std::exp(u));
}

// A state's storage, F32 or BF16 (ops/gated_delta_rule.h): elements are read to the accumulator
// type and stored rounded once, f32 first (as CUDA's f32 registers), then to bf16 (nearest even).
struct StateRef {
    void* data = nullptr;
    bool bf16 = false;
    float load(int64_t i) const {
        return bf16 ? bf16_to_float(static_cast<const uint16_t*>(data)[i])
                    : static_cast<const float*>(data)[i];
    }
    void store(int64_t i, float v) const {
        if (bf16)
            static_cast<uint16_t*>(data)[i] = float_to_bf16(v);
        else
            static_cast<float*>(data)[i] = v;
    }
    StateRef at(int64_t offset) const {
        return {static_cast<char*>(data) + offset * (bf16 ? 2 : 4), bf16};
    }
};

// One (sequence, value head) problem: pointers and strides into the op's tensors.
struct HeadTask {
    const TensorView *q, *k, *v, *g, *beta, *out;
    int64_t row0, rows, h, hk, dk, dv;
    StateRef state;     // [dk, dv] in the slot pool
    StateRef snapshots; // when set, the state after row i goes to snapshots.at(i * snapshot_stride)
    int64_t snapshot_stride = 0;
};

template <typename Acc> void load_normalized(const float* src, int64_t n, Acc scale, Acc* dst) {
    Acc sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += Acc(src[i]) * Acc(src[i]);
    Acc inv = Acc(1) / std::sqrt(sum + Acc(1e-6)); // eps on the sum of squares (FLA l2norm)
    for (int64_t i = 0; i < n; ++i) dst[i] = Acc(src[i]) * inv * scale;
}

template <typename Acc> struct RowInputs {
    std::vector<Acc> q, k; // normalised [rows, dk]
    std::vector<Acc> v;    // [rows, dv]
    std::vector<Acc> g, beta;
    explicit RowInputs(const HeadTask& t)
        : q(t.rows * t.dk), k(t.rows * t.dk), v(t.rows * t.dv), g(t.rows), beta(t.rows) {
        const Acc q_scale = Acc(1) / std::sqrt(Acc(t.dk));
        for (int64_t i = 0; i < t.rows; ++i) {
            int64_t r = t.row0 + i;
            load_normalized(t.q->ptr<float>() + t.q->offset(r, t.hk), t.dk, q_scale, &q[i * t.dk]);
            load_normalized(t.k->ptr<float>() + t.k->offset(r, t.hk), t.dk, Acc(1), &k[i * t.dk]);
            const float* vr = t.v->ptr<float>() + t.v->offset(r, t.h);
            for (int64_t j = 0; j < t.dv; ++j) v[i * t.dv + j] = Acc(vr[j]);
            g[i] = Acc(t.g->ptr<float>()[t.g->offset(r, t.h)]);
            beta[i] = Acc(t.beta->ptr<float>()[t.beta->offset(r, t.h)]);
        }
    }
};

template <typename Acc> void recurrent_head(const HeadTask& t) {
    const int64_t dk = t.dk, dv = t.dv;
    RowInputs<Acc> in(t);
    std::vector<Acc> S(dk * dv), kv(dv), acc(dv);
    for (int64_t i = 0; i < dk * dv; ++i) S[i] = Acc(t.state.load(i));
    for (int64_t r = 0; r < t.rows; ++r) {
        const Acc* kr = &in.k[r * dk];
        const Acc* qr = &in.q[r * dk];
        const Acc decay = std::exp(in.g[r]);
        for (auto& s : S) s *= decay; // decay first
        std::fill(kv.begin(), kv.end(), Acc(0));
        for (int64_t i = 0; i < dk; ++i)
            for (int64_t j = 0; j < dv; ++j) kv[j] += S[i * dv + j] * kr[i];
        for (int64_t j = 0; j < dv; ++j) kv[j] = in.beta[r] * (in.v[r * dv + j] - kv[j]); // u
        for (int64_t i = 0; i < dk; ++i)
            for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += kr[i] * kv[j];
        float* o = t.out->ptr<float>() + t.out->offset(t.row0 + r, t.h);
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t i = 0; i < dk; ++i)
            for (int64_t j = 0; j < dv; ++j) acc[j] += S[i * dv + j] * qr[i]; // read after update
        for (int64_t j = 0; j < dv; ++j) o[j] = float(acc[j]);
        if (t.snapshots.data && r + 1 < t.rows) {
            const StateRef snap = t.snapshots.at(r * t.snapshot_stride);
            for (int64_t i = 0; i < dk * dv; ++i) snap.store(i, float(S[i]));
        }
    }
    for (int64_t i = 0; i < dk * dv; ++i) t.state.store(i, float(S[i]));
}

template <typename Acc> Acc dot(const Acc* a, const Acc* b, int64_t n) {
    Acc s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

// One chunk of n rows starting at c0 (MODEL_QWEN3_5.md §2.3, chunked form); updates S.
template <typename Acc>
void chunk_step(const HeadTask& t, const RowInputs<Acc>& in, int64_t c0, int64_t n,
                std::vector<Acc>& S) {
    const int64_t dk = t.dk, dv = t.dv;
    std::vector<Acc> gamma(n), A(n * n, Acc(0)), U(n * dv), W(n * dk), Vp(n * dv);
    Acc running = 0;
    for (int64_t i = 0; i < n; ++i) gamma[i] = running += in.g[c0 + i];
    auto kk = [&](int64_t i) { return &in.k[(c0 + i) * dk]; };
    // A[i, j] = beta_i (k_i . k_j) e^{gamma_i - gamma_j}, strictly lower.
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < i; ++j)
            A[i * n + j] = in.beta[c0 + i] * dot(kk(i), kk(j), dk) * std::exp(gamma[i] - gamma[j]);
    // Forward substitution: (I + A) U = diag(beta) V and (I + A) W = diag(beta e^gamma) K.
    for (int64_t i = 0; i < n; ++i) {
        const Acc b = in.beta[c0 + i];
        for (int64_t j = 0; j < dv; ++j) U[i * dv + j] = b * in.v[(c0 + i) * dv + j];
        const Acc bw = b * std::exp(gamma[i]);
        for (int64_t j = 0; j < dk; ++j) W[i * dk + j] = bw * kk(i)[j];
        for (int64_t m = 0; m < i; ++m) {
            const Acc a = A[i * n + m];
            for (int64_t j = 0; j < dv; ++j) U[i * dv + j] -= a * U[m * dv + j];
            for (int64_t j = 0; j < dk; ++j) W[i * dk + j] -= a * W[m * dk + j];
        }
    }
    // V' = U - W S
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < dv; ++j) Vp[i * dv + j] = U[i * dv + j];
        for (int64_t p = 0; p < dk; ++p) {
            const Acc w = W[i * dk + p];
            for (int64_t j = 0; j < dv; ++j) Vp[i * dv + j] -= w * S[p * dv + j];
        }
    }
    // O_i = e^{gamma_i} q_i S + sum_{j <= i} (q_i . k_j) e^{gamma_i - gamma_j} V'_j
    std::vector<Acc> o(dv);
    for (int64_t i = 0; i < n; ++i) {
        const Acc* qi = &in.q[(c0 + i) * dk];
        std::fill(o.begin(), o.end(), Acc(0));
        for (int64_t p = 0; p < dk; ++p) {
            const Acc qp = qi[p];
            for (int64_t j = 0; j < dv; ++j) o[j] += qp * S[p * dv + j];
        }
        const Acc ei = std::exp(gamma[i]);
        for (int64_t j = 0; j < dv; ++j) o[j] *= ei;
        for (int64_t m = 0; m <= i; ++m) {
            const Acc a = dot(qi, kk(m), dk) * std::exp(gamma[i] - gamma[m]);
            for (int64_t j = 0; j < dv; ++j) o[j] += a * Vp[m * dv + j];
        }
        float* out = t.out->ptr<float>() + t.out->offset(t.row0 + c0 + i, t.h);
        for (int64_t j = 0; j < dv; ++j) out[j] = float(o[j]);
    }
    // S <- e^{gamma_last} S + sum_j e^{gamma_last - gamma_j} k_j V'_j^T
    const Acc last = gamma[n - 1];
    const Acc e_last = std::exp(last);
    for (auto& s : S) s *= e_last;
    for (int64_t m = 0; m < n; ++m) {
        const Acc e = std::exp(last - gamma[m]);
        for (int64_t p = 0; p < dk; ++p) {
            const Acc kp = e * kk(m)[p];
            for (int64_t j = 0; j < dv; ++j) S[p * dv + j] += kp * Vp[m * dv + j];
        }
    }
}

template <typename Acc> void chunked_head(const HeadTask& t) {
    RowInputs<Acc> in(t);
    std::vector<Acc> S(t.dk * t.dv);
    for (int64_t i = 0; i < t.dk * t.dv; ++i) S[i] = Acc(t.state.load(i));
    for (int64_t c0 = 0; c0 < t.rows; c0 += kChunk)
        chunk_step(t, in, c0, std::min(kChunk, t.rows - c0), S);
    for (int64_t i = 0; i < t.dk * t.dv; ++i) t.state.store(i, float(S[i]));
}

} // namespace

void gdn_gates(CpuMode mode, const TensorView& a, const TensorView& b, const TensorView& A_log,
               const TensorView& dt_bias, const TensorView& g, const TensorView& beta) {
    const int64_t T = a.size(0), Hv = a.size(1);
    const float* al = A_log.ptr<float>();
    const float* dt = dt_bias.ptr<float>();
    for_each_row(mode, T, [&](int64_t t) {
        for (int64_t h = 0; h < Hv; ++h) {
            double av = row_f32(a, t)[h], bv = row_f32(b, t)[h];
            if (mode == CpuMode::Reference) {
                row_f32(beta, t)[h] = float(sigmoid(bv));
                row_f32(g, t)[h] = float(-std::exp(double(al[h])) * softplus(av + double(dt[h])));
            } else {
                row_f32(beta, t)[h] = sigmoid(float(bv));
                row_f32(g, t)[h] = -std::exp(al[h]) * softplus(float(av) + dt[h]);
            }
        }
    });
}

void gated_delta_rule(CpuMode mode, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& g, const TensorView& beta, const SeqBatch& batch,
                      const TensorView& state, const TensorView& out, GdnAlgo algo) {
    const int64_t Hk = q.size(1), dk = q.size(2), Hv = v.size(1), dv = v.size(2);
    const int64_t ratio = Hv / Hk;
    const int64_t tasks = int64_t(batch.num_seqs) * Hv;
    for_each_task(
        mode, tasks,
        [&](int64_t task) {
            const int32_t s = int32_t(task / Hv);
            const int64_t h = task % Hv;
            const int64_t rows = batch.rows(s);
            if (rows == 0) return;
            const StateRef base{state.data, state.dtype == DType::BF16};
            HeadTask t{&q,   &k, &v,        &g, &beta, &out, batch.host_row_begin[s],
                       rows, h,  h / ratio, dk, dv,
                       base.at(batch.host_state_slot[s] * state.stride[0] + h * state.stride[1]),
                       StateRef{}};
            const int32_t snap_row = batch.has_snapshots() ? batch.host_snapshot_row[s] : -1;
            if (snap_row >= 0) { // per-row states need the recurrence
                t.snapshots = base.at(snap_row * state.stride[0] + h * state.stride[1]);
                t.snapshot_stride = state.stride[0];
            }
            bool chunked =
                snap_row < 0 &&
                (algo == GdnAlgo::Chunked ||
                 (algo == GdnAlgo::Auto && mode == CpuMode::Fast && rows >= kChunkedMinRows));
            if (mode == CpuMode::Reference)
                chunked ? chunked_head<double>(t) : recurrent_head<double>(t);
            else
                chunked ? chunked_head<float>(t) : recurrent_head<float>(t);
        },
        int64_t(batch.max_rows_per_seq) * dk * dv * 4);
}

} // namespace ninfer::ops::cpu
