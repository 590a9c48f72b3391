// Log-probabilities of logit rows (the full softmax of the raw logits).
//
// logprobs_top_k: lse[r] = log(sum_v exp(logits[r, v])) over all V columns; the k largest logits
//   among ids [0, vocab_limit) (ties: lower id first; +0 ranks above -0, a NaN above +inf with
//   its sign bit clear and below -inf with it set) give ids[r, :] and
//   logprobs[r, i] = logits[r, ids[r, i]] - lse[r], with lse[r] as stored (rounded to f32) and
//   the difference rounded once (logprob_of below), so any caller that subtracts the stored lse
//   through logprob_of (the sampler's chosen token, the prompt logprobs) gets the same bits.
//   k may be 0 (only lse is written).
//   logits: [R, V] F32, rows contiguous   lse: [R] F32   ids: [R, k] I32   logprobs: [R, k] F32
// Numerics: the sum of exponentials in f64 on the CPU (both modes), f32 elsewhere.
#pragma once

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

// A logit's logprob from the stored lse, rounded as logprobs_top_k rounds it (above): callers that
// report one from the lse (a sampled token, a prompt token) get its top-k entry's bits.
inline float logprob_of(float logit, float lse) {
    return float(double(logit) - double(lse));
}

void logprobs_top_k(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs);

} // namespace ninfer::ops
