// Verification: turns the logit rows of a step into committed tokens, for plain rows and for
// verified drafts alike.
//
// A sampling sequence has 1 + K logit rows: column j holds the target's distribution of the
// token after [anchor, d_1 .. d_j]. Columns are taken in order; column j's token t is sampled
// exactly as without speculation (penalties over everything committed so far, the request's
// constraint mask in its current state, its seed at t's position) and committed; the round goes
// on to column j + 1 only when j < K and t == d_{j+1}.
//
// Why this is exact rejection sampling. One-hot drafts (MTP, DFlash, DFlash2's greedy walk):
// the draft distribution q is one-hot on d. Accepting d with probability min(1, p(d)/q(d)) =
// p(d), else sampling from the residual norm(max(0, p - q)) = p without d, gives the same law
// as sampling t ~ p and accepting iff t == d. Greedy rows are the special case t = argmax p.
// Because the random numbers are those of the token's position, a seeded request samples the
// same tokens with and without speculation (up to the float noise of batched logits).
// Sparse drafts (DFlash2's sampled walk, Sequence::draft_q): the sampler runs the p/q test
// itself (ops::sample_tokens' drafts: accept d when a * q(d) < p(d), else sample the residual
// max(0, p - q)), which accepts with probability sum min(p, q) instead of sum p q; the token is
// still distributed as p, and equals d exactly when d was accepted, so the walk below is the
// same for both kinds.
//
// A column whose logits are not finite commits nothing: the sequence ends with an error after
// the tokens before it (the non-finite check is part of every commit).
//
// Sabotage arm for the tests' statistical gate: NINFER_SPEC_SABOTAGE=accept_drafts (read at
// construction) commits every draft as if the target had sampled it, a wrong acceptance rule
// that the distribution test must catch.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "runtime/sampler.h"
#include "runtime/speculative/draft_policy.h"
#include "runtime/step_plan.h"

namespace ninfer::runtime {

// What the runner does for each token the verifier takes.
class TokenSink {
public:
    virtual ~TokenSink() = default;
    // The sampling input of seq's next token, at `position` (fills its constraint mask).
    // nullopt: the request ended (its constraint failed).
    virtual std::optional<SampleInput> prepare(Sequence& seq, int64_t position) = 0;
    // Commits a sampled token (or ends the request on a non-finite row); false when the
    // request ended with it (stop id, length, error).
    virtual bool accept(Sequence& seq, const SampleOutput& out) = 0;
};

class Verifier {
public:
    Verifier(const ops::ExecContext& ctx, Sampler& sampler, int64_t token_limit);
    // logits: [plan.sample_rows(), V]. Lowers the committed rows (the plan's rows) of entries
    // whose drafts were rejected, and records each round in its sequence's counters, `totals`
    // and the policy (when given).
    void run(StepPlan& plan, const TensorView& logits, TokenSink& sink, DraftPolicy* policy,
             SpeculativeStats& totals);

private:
    struct Cursor;
    void sample_columns(std::vector<Cursor>& cursors, const TensorView& logits, TokenSink& sink,
                        bool all_columns);

    ops::ExecContext ctx_;
    Sampler& sampler_;
    int64_t token_limit_;
    bool sabotage_ = false;
    Tensor gathered_, row_ids_;
};

} // namespace ninfer::runtime
