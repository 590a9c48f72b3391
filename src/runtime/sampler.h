// Sampler: turns the logit rows of one step into tokens and log-probabilities, using the
// logits, sampling and penalty ops on the engine's device.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"
#include "ninfer/engine.h"
#include "ops/exec_context.h"
#include "ops/sampling.h"

namespace ninfer::runtime {

// What the sampler needs to know about one row's request.
struct SampleInput {
    const SamplingOptions* options = nullptr;
    uint64_t seed = 0;
    int64_t position = 0; // position of the token being sampled (the RNG counter)
    int top_logprobs = 0;
    const std::unordered_set<int32_t>* prompt_tokens = nullptr;          // for repetition
    const std::unordered_map<int32_t, int32_t>* output_counts = nullptr; // generated so far
    const std::vector<uint8_t>* allowed = nullptr; // ids that may be sampled (nullptr: all)
    const std::unordered_set<int32_t>* banned = nullptr; // ids that may not (min_new_tokens)
    // Speculative verification of a draft proposed from a sparse distribution q (DFlash2's
    // sampled walk): the draft and q over draft_k ids (ops/sampling.h's drafts). draft < 0: none
    // (a one-hot draft needs none: the verifier compares the sampled token with it).
    int32_t draft = -1;
    const int32_t* draft_ids = nullptr;
    const float* draft_q = nullptr;
    int draft_k = 0;
};

// The logit given to ids a TokenConstraint disallows: finite (the sampling op refuses
// non-finite logits) and far below any real logit, so its probability is exactly 0.
constexpr float kMaskedLogit = -1e30f;

struct SampleOutput {
    bool non_finite = false; // the row had a NaN/Inf logit: no token
    GeneratedToken token;
};

// One step's sampling costs one upload (the rows' parameters) and one download (every result,
// packed on the device), so one host synchronisation, unless penalties or token masks apply.
class Sampler {
public:
    explicit Sampler(const ops::ExecContext& ctx) : ctx_(ctx) {}
    // logits: [R, V] F32 on the device (left unmodified). token_limit: real ids are below it.
    std::vector<SampleOutput> sample(const TensorView& logits, int64_t token_limit,
                                     const std::vector<SampleInput>& rows);

private:
    const ops::SamplingParamsRow* upload_params(const std::vector<SampleInput>& rows);
    TensorView penalized(const TensorView& logits, const std::vector<SampleInput>& rows,
                         const ops::SamplingParamsRow* device_params);
    void host_edits(const TensorView& to_sample, const std::vector<SampleInput>& rows);
    // The rows' drafts on the device (empty when no row has one).
    ops::SampleDrafts upload_drafts(const std::vector<SampleInput>& rows);
    // A device buffer of at least `elements` of dtype, grown (never shrunk) across steps.
    TensorView reserve(Tensor& buffer, DType dtype, int64_t elements);

    ops::ExecContext ctx_;
    Tensor penalized_; // scratch copy of the logits for penalties
    Tensor params_;    // the rows' SamplingParamsRow on the device
    Tensor results_;   // the packed per-step results (see sampler.cpp)
    Tensor drafts_;    // the rows' drafts: draft [R] I32 | ids [R, k] I32 | q [R, k] F32
};

bool needs_penalties(const SamplingOptions& o);

} // namespace ninfer::runtime
