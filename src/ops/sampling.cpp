#include "ops/sampling.h"

#include <cmath>

#include "core/philox.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

double uniform_from(uint64_t seed, int64_t position, uint64_t stream) {
    return philox_uniform(seed, uint64_t(position), stream);
}

namespace {

// The drafts argument of sample_tokens: shapes, dtypes, and on the CPU (where the values can
// be read) ids that are distinct tokens and q that is a distribution.
void check_drafts(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                  const SampleDrafts& d) {
    constexpr const char* op = "sample_tokens";
    require(d.draft.empty() == d.ids.empty() && d.draft.empty() == d.q.empty(), op,
            ": drafts.draft, drafts.ids and drafts.q come together");
    if (d.empty()) return;
    const int64_t R = logits.size(0);
    for (auto [name, t] :
         {std::pair{"drafts.draft", &d.draft}, {"drafts.ids", &d.ids}, {"drafts.q", &d.q}})
        check_device(ctx, op, name, *t);
    check_dtype(op, "drafts.draft", d.draft, DType::I32);
    check_shape(op, "drafts.draft", d.draft, {R});
    check_dtype(op, "drafts.ids", d.ids, DType::I32);
    check_shape(op, "drafts.ids", d.ids, {R, -1});
    check_rows_contiguous(op, "drafts.ids", d.ids);
    check_dtype(op, "drafts.q", d.q, DType::F32);
    check_shape(op, "drafts.q", d.q, {R, d.ids.size(1)});
    check_rows_contiguous(op, "drafts.q", d.q);
    const int64_t k = d.ids.size(1);
    require(k >= 1 && k <= 64, op, ": drafts have ", k, " entries a row, outside [1, 64]");
    if (ctx.device.type != DeviceType::Cpu) return;
    for (int64_t r = 0; r < R; ++r) {
        const int32_t draft = d.draft.ptr<int32_t>()[r];
        require(draft >= -1 && draft < vocab_limit, op, ": draft ", draft, " of row ", r,
                " outside the vocabulary");
        if (draft < 0) continue;
        const int32_t* ids = d.ids.ptr<int32_t>() + r * d.ids.stride[0];
        const float* q = d.q.ptr<float>() + r * d.q.stride[0];
        double mass = 0;
        for (int64_t i = 0; i < k; ++i) {
            if (ids[i] < 0) continue;
            require(ids[i] < vocab_limit, op, ": draft id ", ids[i], " of row ", r,
                    " outside the vocabulary");
            require(std::isfinite(q[i]) && q[i] >= 0, op, ": q of row ", r, " is not a distribution");
            for (int64_t j = 0; j < i; ++j)
                require(ids[j] != ids[i], op, ": draft id ", ids[i], " repeats in row ", r);
            mass += q[i];
        }
        require(std::abs(mass - 1.0) < 1e-3, op, ": q of row ", r, " sums to ", mass, ", not 1");
    }
}

} // namespace

void apply_penalties(const ExecContext& ctx, const TensorView& logits,
                     const SamplingParamsRow* params, const TensorView& offsets,
                     const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt) {
    constexpr const char* op = "apply_penalties";
    for (auto [name, t] : {std::pair{"logits", &logits},
                           {"offsets", &offsets},
                           {"tokens", &tokens},
                           {"counts", &counts},
                           {"in_prompt", &in_prompt}})
        check_device(ctx, op, name, *t);
    check_dtype(op, "logits", logits, DType::F32);
    check_shape(op, "logits", logits, {-1, -1});
    check_rows_contiguous(op, "logits", logits);
    check_dtype(op, "offsets", offsets, DType::I32);
    check_shape(op, "offsets", offsets, {logits.size(0) + 1});
    check_dtype(op, "tokens", tokens, DType::I32);
    check_dtype(op, "counts", counts, DType::I32);
    check_dtype(op, "in_prompt", in_prompt, DType::U8);
    check_shape(op, "tokens", tokens, {-1});
    check_shape(op, "counts", counts, {tokens.size(0)});
    check_shape(op, "in_prompt", in_prompt, {tokens.size(0)});
    switch (ctx.device.type) {
    case DeviceType::Cpu: {
        const int32_t* off = offsets.ptr<int32_t>();
        require(off[0] == 0 && off[logits.size(0)] == tokens.size(0), op,
                ": offsets must span the token list");
        for (int64_t r = 0; r < logits.size(0); ++r)
            require(off[r] <= off[r + 1], op, ": offsets decrease");
        for (int64_t i = 0; i < tokens.size(0); ++i) {
            int32_t id = tokens.ptr<int32_t>()[i];
            require(id >= 0 && id < logits.size(1), op, ": token ", id, " outside the vocabulary");
        }
        return cpu::apply_penalties(ctx.cpu_mode, logits, params, offsets, tokens, counts,
                                    in_prompt);
    }
    case DeviceType::Cuda:
        return cuda::apply_penalties(ctx, logits, params, offsets, tokens, counts, in_prompt);
    }
    no_backend(op, ctx);
}

void sample_tokens(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source,
                   const TensorView& chosen_logits, const SampleDrafts& drafts) {
    constexpr const char* op = "sample_tokens";
    for (auto [name, t] : {std::pair{"logits", &logits}, {"tokens", &tokens}, {"status", &status}})
        check_device(ctx, op, name, *t);
    check_dtype(op, "logits", logits, DType::F32);
    check_shape(op, "logits", logits, {-1, -1});
    check_rows_contiguous(op, "logits", logits);
    require(vocab_limit >= 1 && vocab_limit <= logits.size(1), op, ": vocab_limit ", vocab_limit,
            " outside [1, ", logits.size(1), "]");
    check_dtype(op, "tokens", tokens, DType::I32);
    check_dtype(op, "status", status, DType::I32);
    check_shape(op, "tokens", tokens, {logits.size(0)});
    check_shape(op, "status", status, {logits.size(0)});
    require(params != nullptr || logits.size(0) == 0, op, ": params missing");
    require(chosen_source.empty() == chosen_logits.empty(), op,
            ": chosen_source and chosen_logits come together");
    if (!chosen_logits.empty()) {
        check_device(ctx, op, "chosen_source", chosen_source);
        check_device(ctx, op, "chosen_logits", chosen_logits);
        check_dtype(op, "chosen_source", chosen_source, DType::F32);
        check_shape(op, "chosen_source", chosen_source, {logits.size(0), -1});
        check_rows_contiguous(op, "chosen_source", chosen_source);
        require(chosen_source.size(1) >= vocab_limit, op, ": chosen_source has ",
                chosen_source.size(1), " columns, fewer than vocab_limit ", vocab_limit);
        check_dtype(op, "chosen_logits", chosen_logits, DType::F32);
        check_shape(op, "chosen_logits", chosen_logits, {logits.size(0)});
    }
    check_drafts(ctx, logits, vocab_limit, drafts);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        return cpu::sample_tokens(ctx.cpu_mode, logits, vocab_limit, params, tokens, status,
                                  chosen_source, chosen_logits, drafts);
    case DeviceType::Cuda:
        return cuda::sample_tokens(ctx, logits, vocab_limit, params, tokens, status, chosen_source,
                                   chosen_logits, drafts);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
