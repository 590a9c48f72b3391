#include "runtime/speculative/mtp_drafter.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/logits.h"
#include "ops/memory.h"

namespace ninfer::runtime {

MtpDrafter::MtpDrafter(const ops::ExecContext& ctx, model::Qwen35Model& model,
                       const CacheStore& cache, int32_t block_size, int64_t token_limit,
                       const ProposalHead& head)
    : ctx_(ctx), model_(model), cache_(cache), block_size_(block_size),
      token_limit_(std::min(token_limit, head.rows())), head_(head) {
    require(model.has_mtp(), "--spec mtp: this checkpoint has no MTP weights (mtp.*)");
    require(!head.maps_ids(), "MtpDrafter: the chain feeds each draft's id to its next step, so "
            "the head's ids must be the global ones");
}

void MtpDrafter::enable_graphs(const DecodeGraphs::Layout& layout, const DraftGraphs& parts) {
    if (parts.chain)
        graphs_ = std::make_unique<ProposeGraphs>(ctx_, model_, layout, token_limit_, head_);
    if (!parts.observe) return;
    // Sabotage arm of the alignment graphs' acceptance gate (mtp_drafter.h).
    const char* sabotage = std::getenv("NINFER_MTP_SABOTAGE");
    const bool unshifted = sabotage && std::string(sabotage) == "observe_unshifted";
    observe_graphs_ = std::make_unique<ObserveGraphs>(ctx_, model_, layout, unshifted ? 0 : 1);
}

void MtpDrafter::warm_graphs(int32_t bucket, int32_t rows) {
    if (observe_graphs_) observe_graphs_->warm(bucket, rows, cache_.views());
    if (graphs_ && rows > 1) graphs_->warm(bucket, rows - 1, cache_.views());
}

TensorView MtpDrafter::buffer(Tensor& t, int64_t rows, int64_t cols, DType dtype) {
    return rows_buffer(ctx_, t, rows, cols, dtype);
}

void MtpDrafter::greedy(const TensorView& rows, const TensorView& ids) {
    const int64_t n = rows.size(0), V = head_.rows();
    TensorView logits = buffer(logits_, n, V, DType::F32);
    head_.project(ctx_, rows, logits);
    TensorView lse = buffer(lse_, n, 1, DType::F32).reshape({n});
    TensorView top = buffer(top_, n, 1, DType::F32);
    ops::logprobs_top_k(ctx_, logits, token_limit_, lse, ids.reshape({n, 1}), top);
}

void MtpDrafter::propose(const StepPlan& plan) {
    std::vector<Sequence*> seqs;
    for (const StepEntry& e : plan.entries)
        if (!e.seq->drafts.empty()) {
            require(e.seq->draft_ready && e.seq->draft_row >= 0,
                    "MtpDrafter: drafts asked of a sequence without MTP context");
            seqs.push_back(e.seq);
        }
    if (seqs.empty()) return;
    // Longest chains first: the sequences that continue at chain step i are then the first m_i,
    // so every step's inputs are leading rows of the previous step's outputs (no compaction).
    std::stable_sort(seqs.begin(), seqs.end(), [](const Sequence* a, const Sequence* b) {
        return a->drafts.size() > b->drafts.size();
    });
    if (graphs_ && graphs_->eligible(seqs))
        return graphs_->run(seqs, context_, cache_.views());
    const int64_t H = model_.config().hidden_size, n = int64_t(seqs.size());
    const int64_t K = int64_t(seqs.front()->drafts.size());
    // ids[i, j]: draft i + 1 of sequence j, written by the device; read once, at the end.
    TensorView ids = buffer(draft_ids_, K * n, 1, DType::I32).reshape({K, n});
    // Draft 1: the lm_head over the MTP output at each sequence's last committed position.
    std::vector<int32_t> rows;
    for (Sequence* s : seqs) rows.push_back(s->draft_row);
    TensorView rid = buffer(row_ids_, n, 1, DType::I32).reshape({n});
    ops::upload(ctx_, TensorView::contiguous(rows.data(), DType::I32, Device::cpu(), {n}), rid);
    // The chain's hidden rows alternate between two buffers.
    int cur = 0;
    TensorView hidden = buffer(chain_[cur], n, H, ctx_.dtype);
    ops::embedding(ctx_, rid, context_, hidden); // row gather
    greedy(hidden, ids.narrow(0, 0, 1).reshape({n}));
    // Draft i >= 2: one MTP row per sequence that wants it, fed draft i - 1 from the device.
    const model::CacheViews views = cache_.views();
    for (int64_t step = 1; step < K; ++step) {
        std::vector<RowSpan> spans;
        for (Sequence* s : seqs) {
            if (int64_t(s->drafts.size()) <= step) break;
            // Step i (1-based) runs at position cached + i - 2; its token comes from `ids`.
            spans.push_back({s, s->cached + step - 1, {0}, -1, false});
        }
        const int64_t m = int64_t(spans.size());
        std::vector<int32_t> no_logits;
        model::ForwardBatch batch = build_rows_batch(ctx_, spans, no_logits, block_size_, buffers_);
        batch.tokens = ids.narrow(0, step - 1, 1).reshape({n}).narrow(0, 0, m);
        cur ^= 1;
        TensorView out = buffer(chain_[cur], m, H, ctx_.dtype);
        model_.mtp_forward(ctx_, batch, hidden.narrow(0, 0, m), views, out, TensorView());
        hidden = out;
        greedy(hidden, ids.narrow(0, step, 1).reshape({n}).narrow(0, 0, m));
    }
    std::vector<int32_t> host(size_t(K * n), 0);
    ops::download(ctx_, ids, TensorView::contiguous(host.data(), DType::I32, Device::cpu(), {K, n}));
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < int64_t(seqs[size_t(j)]->drafts.size()); ++i)
            seqs[size_t(j)]->drafts[size_t(i)] = host[size_t(i * n + j)];
}

void MtpDrafter::observe(const StepPlan& plan, const TensorView& hidden, bool align_decode) {
    for (const StepEntry& e : plan.entries) {
        Sequence& s = *e.seq;
        s.draft_ready = false;
        if (e.generates() && s.drafts.empty() && !align_decode) s.drafter_off = true;
    }
    if (observe_graphs_ && observe_graphs_->width(plan) > 0)
        return observe_from_graph(plan, hidden);
    std::vector<RowSpan> spans;
    std::vector<int32_t> source; // the target hidden row of each MTP row
    std::vector<Sequence*> owners;
    int32_t row = 0;
    for (const StepEntry& e : plan.entries) {
        Sequence& s = *e.seq;
        if (s.drafter_off) { // its MTP context has a gap: it decodes plainly
            row += int32_t(e.rows);
            continue;
        }
        // Rows whose next token is known (the last sampled one may be missing: an error).
        const int64_t n =
            std::min<int64_t>(e.committed, int64_t(s.tokens.size()) - 1 - s.cached);
        if (n > 0 && !s.done) {
            RowSpan sp{&s, s.cached, {}, -1, true, 1}; // row p embeds tokens[p + 1]
            for (int64_t i = 0; i < n; ++i) {
                sp.tokens.push_back(s.tokens[size_t(s.cached + i + 1)]);
                source.push_back(row + int32_t(i));
            }
            spans.push_back(std::move(sp));
            owners.push_back(&s);
        }
        row += int32_t(e.rows);
    }
    if (spans.empty()) return;
    const int64_t T = int64_t(source.size()), H = model_.config().hidden_size;
    TensorView ids = buffer(row_ids_, T, 1, DType::I32).reshape({T});
    ops::upload(ctx_, TensorView::contiguous(source.data(), DType::I32, Device::cpu(), {T}), ids);
    TensorView in = buffer(chain_[0], T, H, ctx_.dtype);
    ops::embedding(ctx_, ids, hidden, in); // the committed rows' target hidden states
    std::vector<int32_t> no_logits;
    model::ForwardBatch batch = build_rows_batch(ctx_, spans, no_logits, block_size_, buffers_);
    context_ = buffer(context_out_, T, H, ctx_.dtype);
    model_.mtp_forward(ctx_, batch, in, cache_.views(), context_, TensorView());
    int32_t end = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
        Sequence& s = *owners[i];
        end += int32_t(spans[i].tokens.size());
        mark_aligned(s, end - 1, spans[i].pos_begin + int64_t(spans[i].tokens.size()));
    }
}

void MtpDrafter::observe_from_graph(const StepPlan& plan, const TensorView& hidden) {
    context_ = observe_graphs_->run(plan, hidden, cache_.views());
    int32_t row = 0;
    for (const StepEntry& e : plan.entries) {
        // Entry rows at row .. row + W - 1; a step without a committed row aligned nothing.
        if (e.committed > 0)
            mark_aligned(*e.seq, row + int32_t(e.committed) - 1, e.seq->cached + e.committed);
        row += int32_t(e.rows);
    }
}

void MtpDrafter::mark_aligned(Sequence& s, int32_t last_row, int64_t aligned_end) {
    s.draft_row = last_row;
    // Ready when the MTP context reaches the anchor (the last token, not yet run).
    s.draft_ready = aligned_end == int64_t(s.tokens.size()) - 1;
}

} // namespace ninfer::runtime
