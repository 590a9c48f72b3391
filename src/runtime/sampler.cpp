#include "runtime/sampler.h"

#include <algorithm>
#include <bit>

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

// The results of one step, packed in one device buffer of 32-bit words so one download brings
// them all: tokens [R] I32 | status [R] I32 | lse [R] F32 | chosen logit [R] F32 |
// top ids [R, k] I32 | top logprobs [R, k] F32 (k = the largest top_logprobs of the rows).
struct Packed {
    int64_t R, k;
    int64_t words() const { return 4 * R + 2 * R * k; }
    static TensorView part(const TensorView& words, DType dtype, int64_t begin,
                           std::initializer_list<int64_t> dims) {
        return TensorView::contiguous(words.ptr<int32_t>() + begin, dtype, words.device, dims);
    }
    TensorView tokens(const TensorView& w) const { return part(w, DType::I32, 0, {R}); }
    TensorView status(const TensorView& w) const { return part(w, DType::I32, R, {R}); }
    TensorView lse(const TensorView& w) const { return part(w, DType::F32, 2 * R, {R}); }
    TensorView chosen(const TensorView& w) const { return part(w, DType::F32, 3 * R, {R}); }
    TensorView ids(const TensorView& w) const {
        return k ? part(w, DType::I32, 4 * R, {R, k}) : TensorView{};
    }
    TensorView logprobs(const TensorView& w) const {
        return k ? part(w, DType::F32, 4 * R + R * k, {R, k}) : TensorView{};
    }
};

float as_float(int32_t word) {
    return std::bit_cast<float>(word);
}

// The host copy of the packed results as SampleOutputs.
std::vector<SampleOutput> unpack(const Packed& p, const std::vector<int32_t>& w,
                                 const std::vector<SampleInput>& rows) {
    std::vector<SampleOutput> out(static_cast<size_t>(p.R));
    for (int64_t r = 0; r < p.R; ++r) {
        SampleOutput& o = out[size_t(r)];
        if (w[size_t(p.R + r)] != ops::kSampleOk) {
            o.non_finite = true;
            continue;
        }
        o.token.id = w[size_t(r)];
        o.token.logprob =
            ops::logprob_of(as_float(w[size_t(3 * p.R + r)]), as_float(w[size_t(2 * p.R + r)]));
        const int64_t top = 4 * p.R + r * p.k;
        for (int64_t i = 0; i < rows[size_t(r)].top_logprobs; ++i)
            o.token.top_logprobs.push_back(
                {w[size_t(top + i)], as_float(w[size_t(top + p.R * p.k + i)])});
    }
    return out;
}

} // namespace

bool needs_penalties(const SamplingOptions& o) {
    return o.repetition_penalty != 1.0f || o.frequency_penalty != 0.0f ||
           o.presence_penalty != 0.0f;
}

TensorView Sampler::reserve(Tensor& buffer, DType dtype, int64_t elements) {
    if (!buffer.defined() || buffer.numel() < elements)
        buffer = Tensor::empty(ops::device_allocator(ctx_.device), dtype, {elements});
    return buffer.view().narrow(0, 0, elements);
}

std::vector<SampleOutput> Sampler::sample(const TensorView& logits, int64_t token_limit,
                                          const std::vector<SampleInput>& rows) {
    const int64_t R = logits.size(0);
    if (R == 0) return {};
    int64_t top_k = 0;
    for (const auto& r : rows) top_k = std::max<int64_t>(top_k, r.top_logprobs);
    const Packed packed{R, top_k};
    const TensorView words = reserve(results_, DType::I32, std::max<int64_t>(packed.words(), 1));
    // Log-probabilities of the raw logits.
    ops::logprobs_top_k(ctx_, logits, token_limit, packed.lse(words), packed.ids(words),
                        packed.logprobs(words));
    const ops::SamplingParamsRow* device_params = upload_params(rows);
    // Penalties and masks act on a copy, so the reported log-probabilities (and the chosen
    // token's logit, gathered from `logits`) stay those of the raw logits.
    const TensorView to_sample = penalized(logits, rows, device_params);
    ops::sample_tokens(ctx_, to_sample, token_limit, device_params, packed.tokens(words),
                       packed.status(words), logits, packed.chosen(words), upload_drafts(rows));
    std::vector<int32_t> host(static_cast<size_t>(packed.words()));
    ops::download(ctx_, words.narrow(0, 0, packed.words()), host_view(host, DType::I32));
    return unpack(packed, host, rows);
}

// The per-row parameters live on the execution device, as the ops' contract says.
const ops::SamplingParamsRow* Sampler::upload_params(const std::vector<SampleInput>& rows) {
    std::vector<ops::SamplingParamsRow> params;
    for (const auto& r : rows) params.push_back(to_row(r));
    const int64_t bytes = int64_t(params.size() * sizeof(ops::SamplingParamsRow));
    const TensorView dev = reserve(params_, DType::U8, std::max<int64_t>(bytes, 1));
    if (bytes > 0)
        ops::upload(ctx_, TensorView::contiguous(params.data(), DType::U8, Device::cpu(), {bytes}),
                    dev.narrow(0, 0, bytes));
    return static_cast<const ops::SamplingParamsRow*>(dev.data);
}

ops::SampleDrafts Sampler::upload_drafts(const std::vector<SampleInput>& rows) {
    int64_t k = 0;
    for (const auto& r : rows)
        if (r.draft >= 0) k = std::max<int64_t>(k, r.draft_k);
    if (k == 0) return {};
    const int64_t R = int64_t(rows.size());
    // One upload of 32-bit words: draft [R] | ids [R, k] (-1: unused) | q [R, k] (f32 bits).
    std::vector<int32_t> words(static_cast<size_t>(R + 2 * R * k), -1);
    for (int64_t r = 0; r < R; ++r) {
        const SampleInput& in = rows[size_t(r)];
        int32_t* q = words.data() + R + R * k + r * k;
        for (int64_t i = 0; i < k; ++i) q[i] = 0; // 0.0f
        if (in.draft < 0 || in.draft_k == 0) continue;
        words[size_t(r)] = in.draft;
        for (int64_t i = 0; i < in.draft_k; ++i) {
            words[size_t(R + r * k + i)] = in.draft_ids[i];
            q[i] = std::bit_cast<int32_t>(in.draft_q[i]);
        }
    }
    const TensorView dev = reserve(drafts_, DType::I32, int64_t(words.size()));
    ops::upload(ctx_, host_view(words, DType::I32), dev);
    const auto part = [&](DType dtype, int64_t begin, std::initializer_list<int64_t> dims) {
        return TensorView::contiguous(dev.ptr<int32_t>() + begin, dtype, dev.device, dims);
    };
    return {part(DType::I32, 0, {R}), part(DType::I32, R, {R, k}),
            part(DType::F32, R + R * k, {R, k})};
}

namespace {

// Whether a row's logits are edited on the host (Sampler::host_edits).
bool has_host_edits(const SampleInput& r) {
    return r.allowed != nullptr || !r.options->logit_bias.empty() ||
           !r.options->allowed_token_ids.empty() || (r.banned && !r.banned->empty());
}

} // namespace

// The logits to sample from: `logits` itself, or an edited and penalized copy.
TensorView Sampler::penalized(const TensorView& logits, const std::vector<SampleInput>& rows,
                              const ops::SamplingParamsRow* device_params) {
    const int64_t R = logits.size(0), V = logits.size(1);
    bool any_penalty = false, any_edit = false;
    for (const auto& r : rows) {
        any_penalty |= needs_penalties(*r.options);
        any_edit |= has_host_edits(r);
    }
    if (!any_penalty && !any_edit) return logits;
    if (!penalized_.defined() || penalized_.size(0) < R || penalized_.size(1) != V)
        penalized_ = Tensor::empty(ops::device_allocator(ctx_.device), DType::F32, {R, V});
    const TensorView to_sample = penalized_.view().narrow(0, 0, R);
    ops::copy(ctx_, logits, to_sample);
    if (any_edit) host_edits(to_sample, rows); // logit_bias before penalties, as vLLM's sampler
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
    return to_sample;
}

// Rows with host edits go through the host, one download and upload of V floats each (the edits
// are a handful of ids, or a constraint's mask computed on the host anyway, so no device op is
// needed): logit_bias is added, then every id that may not come next is set to kMaskedLogit (ids
// outside the constraint's mask or allowed_token_ids, stop ids before min_new_tokens). This runs
// before the penalties, which leave a masked id far below every other.
void Sampler::host_edits(const TensorView& to_sample, const std::vector<SampleInput>& rows) {
    const int64_t V = to_sample.size(1);
    std::vector<float> row(static_cast<size_t>(V));
    std::vector<uint8_t> listed;
    const auto mask_outside = [&](const std::vector<uint8_t>& keep) {
        for (int64_t v = 0; v < V; ++v)
            if (size_t(v) >= keep.size() || !keep[size_t(v)]) row[size_t(v)] = kMaskedLogit;
    };
    for (size_t r = 0; r < rows.size(); ++r) {
        const SampleInput& in = rows[r];
        if (!has_host_edits(in)) continue;
        const TensorView dev = to_sample.narrow(0, int64_t(r), 1).reshape({V});
        ops::download(ctx_, dev, host_view(row, DType::F32));
        for (const auto& [id, b] : in.options->logit_bias)
            if (id >= 0 && id < V) row[size_t(id)] += b;
        if (in.allowed) mask_outside(*in.allowed);
        if (!in.options->allowed_token_ids.empty()) {
            listed.assign(static_cast<size_t>(V), 0);
            for (int32_t id : in.options->allowed_token_ids)
                if (id >= 0 && id < V) listed[size_t(id)] = 1;
            mask_outside(listed);
        }
        if (in.banned)
            for (int32_t id : *in.banned)
                if (id >= 0 && id < V) row[size_t(id)] = kMaskedLogit;
        ops::upload(ctx_, host_view(row, DType::F32), dev);
    }
}

} // namespace ninfer::runtime
