// Implements ops/sampling.h on the CPU. Both modes compute the same thresholds in f64 and scan
// ids in ascending order, so they give identical tokens; Reference finds thresholds by full
// sorts, Fast by nth_element and partial sorts over the kept set.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace ninfer::ops::cpu {
namespace {

int32_t argmax(const float* l, int64_t n) {
    int64_t best = 0;
    for (int64_t v = 1; v < n; ++v)
        if (l[v] > l[best]) best = v;
    return int32_t(best);
}

// The value of the k-th largest element (1-based) of values.
double kth_largest(CpuMode mode, std::vector<double> values, int64_t k) {
    if (mode == CpuMode::Reference) {
        std::sort(values.begin(), values.end(), std::greater<>());
        return values[k - 1];
    }
    std::nth_element(values.begin(), values.begin() + (k - 1), values.end(), std::greater<>());
    return values[k - 1];
}

// t*: the largest probability threshold whose kept mass (all p >= t) reaches top_p.
double top_p_threshold(CpuMode mode, const std::vector<double>& p, double top_p, double total) {
    std::vector<double> kept;
    for (double v : p)
        if (v > 0) kept.push_back(v);
    std::sort(kept.begin(), kept.end(), std::greater<>()); // both modes: the order defines t*
    double mass = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
        mass += kept[i];
        // Ties with the threshold are kept too, so the mass test uses the whole tie group.
        if (mass >= top_p * total && (i + 1 == kept.size() || kept[i + 1] < kept[i]))
            return kept[i];
    }
    return kept.empty() ? 0.0 : kept.back();
}

// One row's draft (ops/sampling.h's drafts): the token and q over k ids (-1 entries unused).
struct DraftRow {
    int32_t draft = -1;
    const int32_t* ids = nullptr;
    const float* q = nullptr;
    int64_t k = 0;
};

// The accept test of a sampled draft over the kept weights p (sum total), or, on rejection, p
// turned into the residual max(0, p - q total) with its new total (p is left as it is when
// rounding leaves the residual no mass). Returns true when the draft is accepted.
bool accept_or_residual(const DraftRow& d, const SamplingParamsRow& sp, std::vector<double>& p,
                        double& total) {
    const int64_t n = int64_t(p.size());
    double qd = 0;
    for (int64_t i = 0; i < d.k; ++i)
        if (d.ids[i] == d.draft) qd = d.q[i];
    const double a = philox_uniform(sp.seed, uint64_t(sp.position), kDraftAcceptStream);
    if (d.draft < n && a * qd * total < p[size_t(d.draft)]) return true;
    double removed = 0;
    for (int64_t i = 0; i < d.k; ++i)
        if (d.ids[i] >= 0 && d.ids[i] < n)
            removed += std::min(p[size_t(d.ids[i])], double(d.q[i]) * total);
    if (total - removed <= total * 1e-12) return false; // no residual mass: sample p itself
    for (int64_t i = 0; i < d.k; ++i)
        if (d.ids[i] >= 0 && d.ids[i] < n) {
            double& v = p[size_t(d.ids[i])];
            v = std::max(0.0, v - double(d.q[i]) * total);
        }
    total -= removed;
    return false;
}

int32_t sample_row(CpuMode mode, const float* l, int64_t n, const SamplingParamsRow& sp,
                   const DraftRow& draft) {
    if (sp.greedy || sp.temperature <= 0.0f) return argmax(l, n);
    std::vector<double> scaled(n);
    for (int64_t v = 0; v < n; ++v) scaled[v] = double(l[v]) / double(sp.temperature);
    double cutoff = -INFINITY;
    if (sp.top_k > 0 && sp.top_k < n) cutoff = kth_largest(mode, scaled, sp.top_k);
    double max_value = *std::max_element(scaled.begin(), scaled.end());
    std::vector<double> p(n, 0.0);
    double total = 0;
    for (int64_t v = 0; v < n; ++v)
        if (scaled[v] >= cutoff) total += p[v] = std::exp(scaled[v] - max_value);
    if (sp.top_p < 1.0f) {
        const double t = top_p_threshold(mode, p, double(sp.top_p), total);
        total = 0;
        for (auto& v : p) total += v = (v >= t ? v : 0.0);
    }
    if (sp.min_p > 0.0f) {
        const double floor = double(sp.min_p) * *std::max_element(p.begin(), p.end());
        total = 0;
        for (auto& v : p) total += v = (v >= floor ? v : 0.0);
    }
    if (draft.draft >= 0 && accept_or_residual(draft, sp, p, total)) return draft.draft;
    const double target = philox_uniform(sp.seed, uint64_t(sp.position)) * total;
    double running = 0;
    int32_t last_kept = 0;
    for (int64_t v = 0; v < n; ++v) {
        if (p[v] <= 0) continue;
        running += p[v];
        last_kept = int32_t(v);
        if (running > target) return int32_t(v);
    }
    return last_kept; // rounding left the target at the very top
}

} // namespace

void apply_penalties(CpuMode mode, const TensorView& logits, const SamplingParamsRow* params,
                     const TensorView& offsets, const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt) {
    const int64_t R = logits.size(0);
    const int32_t* off = offsets.ptr<int32_t>();
    for (int64_t r = 0; r < R; ++r) {
        float* l = row_f32(logits, r);
        const SamplingParamsRow& sp = params[r];
        for (int32_t i = off[r]; i < off[r + 1]; ++i) {
            const int32_t token = tokens.ptr<int32_t>()[i];
            const int32_t count = counts.ptr<int32_t>()[i];
            const bool seen = count > 0 || in_prompt.ptr<uint8_t>()[i];
            double v = l[token];
            if (seen && sp.repetition_penalty != 1.0f)
                v = v > 0 ? v / sp.repetition_penalty : v * sp.repetition_penalty;
            v -= double(sp.frequency_penalty) * count;
            v -= double(sp.presence_penalty) * (count > 0 ? 1.0 : 0.0);
            l[token] = float(v);
        }
    }
}

void sample_tokens(CpuMode mode, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source,
                   const TensorView& chosen_logits, const SampleDrafts& drafts) {
    const int64_t R = logits.size(0);
    const bool gather = !chosen_logits.empty();
    auto draft_of = [&](int64_t r) {
        DraftRow d;
        if (drafts.empty()) return d;
        d.draft = drafts.draft.ptr<int32_t>()[r];
        d.ids = drafts.ids.ptr<int32_t>() + r * drafts.ids.stride[0];
        d.q = drafts.q.ptr<float>() + r * drafts.q.stride[0];
        d.k = drafts.ids.size(1);
        return d;
    };
    for_each_row(mode, R, [&](int64_t r) {
        const float* l = row_f32(logits, r);
        bool finite = true;
        for (int64_t v = 0; v < vocab_limit && finite; ++v) finite = std::isfinite(l[v]);
        if (!finite) {
            tokens.ptr<int32_t>()[r] = -1;
            status.ptr<int32_t>()[r] = kSampleNonFinite;
            if (gather) chosen_logits.ptr<float>()[r] = std::numeric_limits<float>::quiet_NaN();
            return;
        }
        const int32_t token = sample_row(mode, l, vocab_limit, params[r], draft_of(r));
        tokens.ptr<int32_t>()[r] = token;
        status.ptr<int32_t>()[r] = kSampleOk;
        if (gather) chosen_logits.ptr<float>()[r] = row_f32(chosen_source, r)[token];
    });
}

} // namespace ninfer::ops::cpu
