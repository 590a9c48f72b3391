// Token sampling over logit rows. The only randomness is uniform_from(seed, position, stream): a
// counter-based Philox draw, so a request replays exactly from its seed.
//
// apply_penalties (OpenAI / vLLM semantics), per row r over its penalty list
//   [offsets[r], offsets[r+1]) of (token, output_count, in_prompt):
//   repetition (if token seen in prompt or output): l > 0 ? l / rep : l * rep
//   l -= frequency * output_count;   l -= presence * (output_count > 0)
//   logits: [R, V] F32 (in place)   offsets: [R+1] I32   tokens, counts: [N] I32   in_prompt: [N]
//   U8
//
// sample_tokens, per row r with params[r] over ids [0, vocab_limit):
//   any non-finite logit -> status[r] = kSampleNonFinite and token[r] = -1 (never a token)
//   greedy (or temperature <= 0): the largest logit, lower id on ties
//   otherwise l / temperature; keep ids whose value is >= the top_k-th largest (top_k <= 0: all);
//   p = softmax over kept; top-p keeps p >= t*, the largest threshold whose kept mass >= top_p;
//   min-p keeps p >= min_p * max p; then with u = uniform_from(seed, position) the token is the
//   first id (ascending) whose running sum of kept p exceeds u * (sum of kept p).
//   Optional drafts (speculative verification with a sparse proposal distribution q, the
//   rejection sampling of Leviathan et al. and Chen et al., 2023): a sampled row r with
//   drafts.draft[r] = d >= 0 takes p = the kept distribution above, normalised, and
//   a = uniform_from(seed, position, kDraftAcceptStream); q(d) is q at d's entry of
//   drafts.ids[r] (0 when absent). The token is d when a * q(d) < p(d); otherwise it is sampled
//   as above from the residual max(0, p - q) (renormalised; p itself when rounding leaves the
//   residual no mass), which never holds d, so "token == d" says the draft was accepted. Every
//   token is distributed as p whatever q is. Greedy rows ignore their draft.
//   drafts.draft: [R] I32 (-1: none)   drafts.ids: [R, k] I32, the row's distinct ids of q (-1:
//   an unused entry)   drafts.q: [R, k] F32 (q at those ids; sums to 1 over the used entries),
//   k <= 64; all three empty: no drafts.
//   logits: [R, V] F32 (not modified)   params: R SamplingParamsRow on the execution device
//   tokens: [R] I32   status: [R] I32
//   Optional (both or neither): chosen_logits[r] = chosen_source[r, tokens[r]] for rows with
//   status kSampleOk and NaN for non-finite rows, gathered on the device so a caller reports the
//   chosen token's log-probability without another transfer. chosen_source: [R, >= vocab_limit]
//   F32, rows contiguous (the raw logits when `logits` carries penalties or masks; may be
//   `logits` itself)   chosen_logits: [R] F32
// Numerics: probabilities and sums in f64 on the CPU (both modes give identical tokens) and on
//   CUDA.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

struct SamplingParamsRow {
    float temperature = 1.0f;
    int32_t top_k = 0;  // <= 0: disabled
    float top_p = 1.0f; // 1: disabled
    float min_p = 0.0f; // 0: disabled
    float repetition_penalty = 1.0f;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    int32_t greedy = 0;
    uint64_t seed = 0;
    int64_t position = 0; // the draw counter: index of the token being sampled in its request
};

// The streams of uniform_from: a position's token draw, a draft's acceptance test at that
// position, and a drafter's own proposal draw for it (DFlash2's sampled candidate walk).
constexpr uint64_t kSampleStream = 0;
constexpr uint64_t kDraftAcceptStream = 1;
constexpr uint64_t kDraftProposalStream = 2;

// Draft rows of sample_tokens (see above); default: none.
struct SampleDrafts {
    TensorView draft; // [R] I32
    TensorView ids;   // [R, k] I32
    TensorView q;     // [R, k] F32
    bool empty() const { return draft.empty(); }
};

constexpr int32_t kSampleOk = 0;
constexpr int32_t kSampleNonFinite = 1;

void apply_penalties(const ExecContext& ctx, const TensorView& logits,
                     const SamplingParamsRow* params, const TensorView& offsets,
                     const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt);

void sample_tokens(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source = {},
                   const TensorView& chosen_logits = {}, const SampleDrafts& drafts = {});

// The uniform draw in [0, 1) used by sample_tokens (Philox4x32-10 keyed by seed, counter
// (position, stream)).
double uniform_from(uint64_t seed, int64_t position, uint64_t stream = kSampleStream);

} // namespace ninfer::ops
