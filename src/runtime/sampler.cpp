#include "runtime/sampler.h"

#include <algorithm>

#include "ops/logits.h"
#include "ops/memory.h"
#include "ops/sampling.h"

namespace ninfer::runtime {
namespace {

ops::SamplingParamsRow to_row(const SampleInput& in) {
    const SamplingOptions& o = *in.options;
    ops::SamplingParamsRow r;
    r.temperature = o.temperature;
    r.top_k = o.top_k;
    r.top_p = o.top_p;
    r.min_p = o.min_p;
    r.repetition_penalty = o.repetition_penalty;
    r.frequency_penalty = o.frequency_penalty;
    r.presence_penalty = o.presence_penalty;
    r.greedy = o.greedy ? 1 : 0;
    r.seed = in.seed;
    r.position = in.position;
    return r;
}

// Host tensor helpers: small I32/F32/U8 arrays staged for upload.
template <typename T> TensorView host_view(std::vector<T>& v, DType dtype) {
    return TensorView::contiguous(v.data(), dtype, Device::cpu(), {int64_t(v.size())});
}

Tensor to_device(const ops::ExecContext& ctx, const TensorView& host) {
    Tensor t = Tensor::empty(ops::device_allocator(ctx.device), host.dtype, {host.numel()});
    if (host.numel() > 0) ops::upload(ctx, host, t.view());
    return t;
}

} // namespace

bool needs_penalties(const SamplingOptions& o) {
    return o.repetition_penalty != 1.0f || o.frequency_penalty != 0.0f ||
           o.presence_penalty != 0.0f;
}

std::vector<SampleOutput> Sampler::sample(const TensorView& logits, int64_t token_limit,
                                          const std::vector<SampleInput>& rows) {
    const int64_t R = logits.size(0), V = logits.size(1);
    Allocator& alloc = ops::device_allocator(ctx_.device);
    int top_k = 0;
    for (const auto& r : rows) top_k = std::max(top_k, r.top_logprobs);
    // Log-probabilities of the raw logits.
    Tensor lse = Tensor::empty(alloc, DType::F32, {R});
    Tensor top_ids, top_lp;
    if (top_k > 0) {
        top_ids = Tensor::empty(alloc, DType::I32, {R, top_k});
        top_lp = Tensor::empty(alloc, DType::F32, {R, top_k});
    }
    ops::logprobs_top_k(ctx_, logits, token_limit, lse, top_ids.view(), top_lp.view());

    // Penalties act on a copy, so the reported log-probabilities stay those of the raw logits.
    TensorView to_sample = logits;
    std::vector<ops::SamplingParamsRow> params;
    bool any_penalty = false, any_mask = false;
    for (const auto& r : rows) {
        params.push_back(to_row(r));
        any_penalty |= needs_penalties(*r.options);
        any_mask |= r.allowed != nullptr;
    }
    // The per-row parameters live on the execution device, as the ops' contract says.
    const int64_t param_bytes = R * int64_t(sizeof(ops::SamplingParamsRow));
    Tensor d_params = Tensor::empty(alloc, DType::U8, {param_bytes});
    ops::upload(ctx_,
                TensorView::contiguous(params.data(), DType::U8, Device::cpu(), {param_bytes}),
                d_params);
    const auto* device_params = static_cast<const ops::SamplingParamsRow*>(d_params.view().data);
    if (any_penalty || any_mask) {
        if (!penalized_.defined() || penalized_.size(0) < R)
            penalized_ = Tensor::empty(alloc, DType::F32, {R, V});
        to_sample = penalized_.view().narrow(0, 0, R);
        ops::copy(ctx_, logits, to_sample);
    }
    if (any_penalty) {
        std::vector<int32_t> offsets{0}, tokens, counts;
        std::vector<uint8_t> in_prompt;
        for (const auto& r : rows) {
            if (needs_penalties(*r.options)) {
                for (const auto& [tok, n] : *r.output_counts) {
                    tokens.push_back(tok);
                    counts.push_back(n);
                    in_prompt.push_back(r.prompt_tokens->count(tok) ? 1 : 0);
                }
                for (int32_t tok : *r.prompt_tokens)
                    if (!r.output_counts->count(tok)) {
                        tokens.push_back(tok);
                        counts.push_back(0);
                        in_prompt.push_back(1);
                    }
            }
            offsets.push_back(int32_t(tokens.size()));
        }
        Tensor d_off = to_device(ctx_, host_view(offsets, DType::I32));
        Tensor d_tok = to_device(ctx_, host_view(tokens, DType::I32));
        Tensor d_cnt = to_device(ctx_, host_view(counts, DType::I32));
        Tensor d_in = to_device(ctx_, host_view(in_prompt, DType::U8));
        ops::apply_penalties(ctx_, to_sample, device_params, d_off, d_tok, d_cnt, d_in);
    }
    if (any_mask) apply_masks(to_sample, rows);
    Tensor d_tokens = Tensor::empty(alloc, DType::I32, {R});
    Tensor d_status = Tensor::empty(alloc, DType::I32, {R});
    ops::sample_tokens(ctx_, to_sample, token_limit, device_params, d_tokens, d_status);

    // Bring the results to the host.
    const size_t rows_n = static_cast<size_t>(R), top_n = static_cast<size_t>(R * top_k);
    std::vector<int32_t> tokens(rows_n), status(rows_n), ids_h(top_n);
    std::vector<float> lse_h(rows_n), lp_h(top_n);
    ops::download(ctx_, d_tokens, host_view(tokens, DType::I32));
    ops::download(ctx_, d_status, host_view(status, DType::I32));
    ops::download(ctx_, lse, host_view(lse_h, DType::F32));
    if (top_k > 0) {
        ops::download(ctx_, top_ids.view().reshape({R * top_k}), host_view(ids_h, DType::I32));
        ops::download(ctx_, top_lp.view().reshape({R * top_k}), host_view(lp_h, DType::F32));
    }
    std::vector<SampleOutput> out(rows_n);
    for (int64_t r = 0; r < R; ++r) {
        SampleOutput& o = out[size_t(r)];
        if (status[size_t(r)] != ops::kSampleOk) {
            o.non_finite = true;
            continue;
        }
        o.token.id = tokens[size_t(r)];
        std::vector<float> one(1);
        ops::download(ctx_, logits.narrow(0, r, 1).narrow(1, o.token.id, 1).reshape({1}),
                      host_view(one, DType::F32));
        o.token.logprob = one[0] - lse_h[size_t(r)];
        for (int i = 0; i < rows[size_t(r)].top_logprobs; ++i)
            o.token.top_logprobs.push_back(
                {ids_h[size_t(r * top_k + i)], lp_h[size_t(r * top_k + i)]});
    }
    return out;
}

// Masked rows go through the host: download, mask, upload (one row of V floats each; masks are
// rare and computed on the host anyway, so no device op is needed).
void Sampler::apply_masks(const TensorView& to_sample, const std::vector<SampleInput>& rows) {
    const int64_t V = to_sample.size(1);
    std::vector<float> row(static_cast<size_t>(V));
    for (size_t r = 0; r < rows.size(); ++r) {
        const std::vector<uint8_t>* allowed = rows[r].allowed;
        if (!allowed) continue;
        const TensorView dev = to_sample.narrow(0, int64_t(r), 1).reshape({V});
        ops::download(ctx_, dev, host_view(row, DType::F32));
        for (int64_t v = 0; v < V; ++v)
            if (size_t(v) >= allowed->size() || !(*allowed)[size_t(v)]) row[size_t(v)] = kMaskedLogit;
        ops::upload(ctx_, host_view(row, DType::F32), dev);
    }
}

} // namespace ninfer::runtime
