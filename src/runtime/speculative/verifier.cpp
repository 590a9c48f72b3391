#include "runtime/speculative/verifier.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "ops/embedding.h"
#include "ops/memory.h"

namespace ninfer {

void SpeculativeStats::record(int drafted_tokens, int accepted_tokens) {
    if (rounds == 0) first_round_accepted = accepted_tokens;
    ++rounds;
    drafted += drafted_tokens;
    accepted += accepted_tokens;
    if (drafted_at.size() < size_t(drafted_tokens)) drafted_at.resize(size_t(drafted_tokens), 0);
    if (accepted_at.size() < drafted_at.size()) accepted_at.resize(drafted_at.size(), 0);
    for (int i = 0; i < drafted_tokens; ++i) ++drafted_at[size_t(i)];
    for (int i = 0; i < accepted_tokens; ++i) ++accepted_at[size_t(i)];
}

void SpeculativeStats::merge(const SpeculativeStats& o) {
    rounds += o.rounds;
    drafted += o.drafted;
    accepted += o.accepted;
    if (drafted_at.size() < o.drafted_at.size()) drafted_at.resize(o.drafted_at.size(), 0);
    if (accepted_at.size() < drafted_at.size()) accepted_at.resize(drafted_at.size(), 0);
    for (size_t i = 0; i < o.drafted_at.size(); ++i) drafted_at[i] += o.drafted_at[i];
    for (size_t i = 0; i < o.accepted_at.size(); ++i) accepted_at[i] += o.accepted_at[i];
}

namespace runtime {

Verifier::Verifier(const ops::ExecContext& ctx, Sampler& sampler, int64_t token_limit)
    : ctx_(ctx), sampler_(sampler), token_limit_(token_limit) {
    const char* sabotage = std::getenv("NINFER_SPEC_SABOTAGE");
    sabotage_ = sabotage && std::string(sabotage) == "accept_drafts";
}

// One sampling sequence's progress through its columns.
struct Verifier::Cursor {
    Sequence* seq = nullptr;
    size_t entry = 0;
    int64_t row0 = 0; // its first logit row
    int column = 0;   // the next column to sample
    int accepted = 0;
    int evaluated = 0; // draft positions compared
    bool dependent = false; // penalties or a constraint: one column per sampler call
    bool live = true;
};

// Samples the next column of every live cursor (every remaining column of independent cursors
// when all_columns) in one sampler call, then walks the results in column order.
void Verifier::sample_columns(std::vector<Cursor>& cursors, const TensorView& logits,
                              TokenSink& sink, bool all_columns) {
    std::vector<int32_t> rows;
    std::vector<SampleInput> inputs;
    std::vector<std::pair<size_t, int>> owner; // (cursor, column) of each sampled row
    for (size_t c = 0; c < cursors.size(); ++c) {
        Cursor& cur = cursors[c];
        if (!cur.live) continue;
        const int K = int(cur.seq->drafts.size());
        const int last = all_columns && !cur.dependent ? K : cur.column;
        const int64_t base = int64_t(cur.seq->tokens.size());
        for (int j = cur.column; j <= last; ++j) {
            std::optional<SampleInput> in = sink.prepare(*cur.seq, base + (j - cur.column));
            if (!in) { // the constraint ended the request
                cur.live = false;
                break;
            }
            const Sequence& seq = *cur.seq;
            const int k = seq.draft_q_k;
            if (j < K && k > 0 && seq.draft_q.size() >= size_t(K * k)) { // a sampled draft's q
                in->draft = seq.drafts[size_t(j)];
                in->draft_ids = seq.draft_q_ids.data() + size_t(j * k);
                in->draft_q = seq.draft_q.data() + size_t(j * k);
                in->draft_k = k;
            }
            rows.push_back(int32_t(cur.row0 + j));
            inputs.push_back(*in);
            owner.push_back({c, j});
        }
    }
    if (rows.empty()) return;
    const int64_t R = int64_t(rows.size()), V = logits.size(1);
    bool identity = R == logits.size(0);
    for (int64_t i = 0; identity && i < R; ++i) identity = rows[size_t(i)] == i;
    TensorView picked = logits;
    if (!identity) { // gather the rows into one [R, V] block
        TensorView ids = rows_buffer(ctx_, row_ids_, R, 1, DType::I32).reshape({R});
        ops::upload(ctx_, TensorView::contiguous(rows.data(), DType::I32, Device::cpu(), {R}), ids);
        picked = rows_buffer(ctx_, gathered_, R, V, DType::F32, 8);
        ops::embedding(ctx_, ids, logits, picked);
    }
    std::vector<SampleOutput> outs = sampler_.sample(picked, token_limit_, inputs);
    for (size_t i = 0; i < outs.size(); ++i) {
        Cursor& cur = cursors[owner[i].first];
        if (!cur.live || owner[i].second != cur.column) continue; // the round already ended
        const int K = int(cur.seq->drafts.size());
        if (sabotage_ && cur.column < K) outs[i].token.id = cur.seq->drafts[size_t(cur.column)];
        const int32_t token = outs[i].token.id;
        const bool matches = !outs[i].non_finite && cur.column < K &&
                             token == cur.seq->drafts[size_t(cur.column)];
        if (cur.column < K && !outs[i].non_finite) ++cur.evaluated;
        if (!sink.accept(*cur.seq, outs[i])) {
            cur.live = false;
            if (matches) ++cur.accepted; // an accepted draft that ended the request (a stop id)
            continue;
        }
        if (matches) {
            ++cur.accepted;
            ++cur.column;
        } else {
            cur.live = false; // the correction (or the bonus after the last draft)
        }
    }
}

void Verifier::run(StepPlan& plan, const TensorView& logits, TokenSink& sink, DraftPolicy* policy,
                   SpeculativeStats& totals) {
    std::unordered_map<const Sequence*, size_t> entry_of;
    for (size_t i = 0; i < plan.entries.size(); ++i) entry_of[plan.entries[i].seq] = i;
    std::vector<Cursor> cursors;
    int64_t row = 0;
    for (Sequence* seq : plan.logit_seqs) {
        Cursor c;
        c.seq = seq;
        c.entry = entry_of.at(seq);
        c.row0 = row;
        c.dependent = seq->request.constraint != nullptr || needs_penalties(seq->request.sampling);
        row += 1 + int64_t(seq->drafts.size());
        cursors.push_back(c);
    }
    for (bool first = true;; first = false) {
        if (std::none_of(cursors.begin(), cursors.end(), [](const Cursor& c) { return c.live; }))
            break;
        sample_columns(cursors, logits, sink, first);
    }
    for (const Cursor& c : cursors) {
        const int K = int(c.seq->drafts.size());
        if (K == 0) continue;
        // Rows that stay: the anchor and the accepted drafts.
        plan.entries[c.entry].committed = plan.entries[c.entry].rows - K + c.accepted;
        c.seq->spec.record(K, c.accepted);
        totals.record(K, c.accepted);
        if (policy) policy->record_round(c.evaluated, c.accepted);
    }
}

} // namespace runtime
} // namespace ninfer
