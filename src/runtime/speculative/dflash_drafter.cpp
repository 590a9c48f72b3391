#include "runtime/speculative/dflash_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <map>
#include <utility>

#include "core/error.h"
#include "ops/dflash.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/logits.h"
#include "ops/memory.h"
#include "ops/sampling.h"

namespace ninfer::runtime {

DFlashDrafter::DFlashDrafter(const ops::ExecContext& ctx, model::Qwen35Model& target,
                             model::DFlashModel& drafter, const ProposalHead& head,
                             const CacheStore& cache, int32_t block_size, int64_t token_limit)
    : ctx_(ctx), target_(target), drafter_(drafter), cache_(cache), block_size_(block_size),
      token_limit_(token_limit), head_(head) {
    const model::DFlashConfig& c = drafter.config();
    // One SpanBatch per distinct (sliding, causal) kind of layer.
    std::map<std::pair<bool, bool>, int> kinds;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto key = std::make_pair(bool(c.sliding[size_t(l)]), bool(c.causal[size_t(l)]));
        auto [it, added] = kinds.emplace(key, int(kinds.size()));
        if (added) kind_first_layer_.push_back(l);
        layer_kind_.push_back(it->second);
    }
    spans_.resize(kinds.size());
    const char* sabotage = std::getenv("NINFER_DFLASH_SABOTAGE");
    shift_taps_ = sabotage && std::string(sabotage) == "shift_taps";
    swap_ranks_ = sabotage && std::string(sabotage) == "swap_ranks";
    const char* one_hot = std::getenv("NINFER_DFLASH_GREEDY_WALK");
    greedy_walk_ = one_hot && std::string(one_hot) == "1";
}

const char* DFlashDrafter::name() const {
    return drafter_.config().v2 ? "dflash2" : "dflash";
}

std::vector<int32_t> DFlashDrafter::feature_layers() const {
    std::vector<int32_t> taps = drafter_.config().target_layers;
    if (shift_taps_)
        for (int32_t& t : taps) t = std::min(t + 1, int32_t(target_.config().num_layers) - 2);
    return taps;
}

TensorView DFlashDrafter::buffer(Tensor& t, int64_t rows, int64_t cols, DType dtype) {
    return rows_buffer(ctx_, t, rows, cols, dtype);
}

TensorView DFlashDrafter::upload_i32(Tensor& t, const std::vector<int32_t>& values) {
    const int64_t n = int64_t(values.size());
    TensorView v = buffer(t, std::max<int64_t>(n, 1), 1, DType::I32).narrow(0, 0, n).reshape({n});
    ops::upload(ctx_,
                TensorView::contiguous(const_cast<int32_t*>(values.data()), DType::I32,
                                       Device::cpu(), {n}),
                v);
    return v;
}

// The temperature of seq's DFlash2 walk: its sampling temperature, or 0 (greedy) for greedy
// requests and under the one-hot switch.
float DFlashDrafter::walk_temperature(const Sequence& seq) const {
    const SamplingOptions& o = seq.request.sampling;
    if (greedy_walk_ || o.greedy || !(o.temperature > 0.0f)) return 0.0f;
    return o.temperature;
}

std::vector<int32_t> DFlashDrafter::choose(const TensorView& rows,
                                           const std::vector<Sequence*>& seqs, int64_t K,
                                           const std::vector<int32_t>& anchors) {
    const int64_t n = int64_t(seqs.size());
    const model::DFlashConfig& c = drafter_.config();
    const int64_t M = n * K, V = head_.rows();
    TensorView logits = buffer(logits_, M, V, DType::F32);
    head_.project(ctx_, rows, logits);
    // Candidates over the whole head (or its shortlist), as the reference drafters take them:
    // the multiplier and the soft cap are monotone, so the ranking is the raw logits'.
    const int64_t k = c.v2 ? c.selector_top_k : 1;
    TensorView lse = buffer(lse_, M, 1, DType::F32).reshape({M});
    TensorView ids = buffer(top_ids_, M, k, DType::I32);
    TensorView values = buffer(top_values_, M, k, DType::F32);
    ops::logprobs_top_k(ctx_, logits, V, lse, ids, values);
    std::vector<int32_t> drafts(static_cast<size_t>(M));
    if (!c.v2 || head_.maps_ids()) { // DFlash's drafts, or the shortlist's ids made global
        std::vector<int32_t> top(static_cast<size_t>(M * k));
        ops::download(ctx_, ids,
                      TensorView::contiguous(top.data(), DType::I32, Device::cpu(), {M, k}));
        head_.to_global(top);
        if (!c.v2) return top;
        ids = buffer(cand_, M, k, DType::I32);
        ops::upload(ctx_, TensorView::contiguous(top.data(), DType::I32, Device::cpu(), {M, k}),
                    ids);
    }
    // DFlash2: unary scores are the processed logits; without a multiplier or cap, log-probs
    // differ from them by a constant per row, which the walk ignores.
    TensorView unary = values;
    if (c.output_multiplier != 1.0 || c.logit_softcap > 0 || swap_ranks_) {
        std::vector<float> v(static_cast<size_t>(M * k)), l(static_cast<size_t>(M));
        ops::download(ctx_, values,
                      TensorView::contiguous(v.data(), DType::F32, Device::cpu(), {M, k}));
        ops::download(ctx_, lse, TensorView::contiguous(l.data(), DType::F32, Device::cpu(), {M}));
        for (int64_t r = 0; r < M; ++r)
            for (int64_t i = 0; i < k; ++i) {
                double x = (double(v[size_t(r * k + i)]) + l[size_t(r)]) * c.output_multiplier;
                if (c.logit_softcap > 0) x = std::tanh(x / c.logit_softcap) * c.logit_softcap;
                v[size_t(r * k + i)] = float(x);
            }
        if (swap_ranks_) // the sabotage arm: the first two candidates trade their scores
            for (int64_t r = 0; r < M && k > 1; ++r)
                std::swap(v[size_t(r * k)], v[size_t(r * k + 1)]);
        unary = buffer(unary_, M, k, DType::F32);
        ops::upload(ctx_, TensorView::contiguous(v.data(), DType::F32, Device::cpu(), {M, k}),
                    unary);
    }
    const int64_t R = c.selector_rank;
    TensorView g = buffer(gproj_, M, R, ctx_.dtype);
    ops::linear(ctx_, rows, drafter_.weights().selector_proj, g);
    TensorView anchor = upload_i32(anchors_, anchors);
    TensorView path = buffer(path_, n, K, DType::I32);
    TensorView q = buffer(q_, M, k, DType::F32).reshape({n, K, k});
    // Sampled walks draw u at each draft's own position (tokens.size() + i), in the proposal's
    // stream, so a seeded request proposes the same drafts in any batch.
    std::vector<float> temperature(static_cast<size_t>(n)), u(static_cast<size_t>(M), 0.0f);
    bool any_sampled = false;
    for (int64_t j = 0; j < n; ++j) {
        const Sequence& s = *seqs[size_t(j)];
        temperature[size_t(j)] = walk_temperature(s);
        if (temperature[size_t(j)] == 0.0f) continue;
        any_sampled = true;
        for (int64_t i = 0; i < K; ++i)
            u[size_t(j * K + i)] = float(ops::uniform_from(
                s.seed, int64_t(s.tokens.size()) + i, ops::kDraftProposalStream));
    }
    TensorView uniforms;
    if (any_sampled) {
        uniforms = buffer(uniforms_, n, K, DType::F32);
        ops::upload(ctx_, TensorView::contiguous(u.data(), DType::F32, Device::cpu(), {n, K}),
                    uniforms);
    }
    // One walk per run of sequences that share a temperature (the op takes one).
    const TensorView unary3 = unary.reshape({n, K, k}), cand3 = ids.reshape({n, K, k});
    const TensorView g3 = g.reshape({n, K, R});
    for (int64_t b = 0; b < n;) {
        int64_t e = b + 1;
        while (e < n && temperature[size_t(e)] == temperature[size_t(b)]) ++e;
        const float t = temperature[size_t(b)];
        ops::dflash_select(ctx_, unary3.narrow(0, b, e - b), cand3.narrow(0, b, e - b),
                           g3.narrow(0, b, e - b), drafter_.weights().predecessor,
                           drafter_.weights().successor, anchor.narrow(0, b, e - b),
                           t > 0 ? uniforms.narrow(0, b, e - b) : TensorView(), t,
                           path.narrow(0, b, e - b), q.narrow(0, b, e - b));
        b = e;
    }
    ops::download(ctx_, path,
                  TensorView::contiguous(drafts.data(), DType::I32, Device::cpu(), {n, K}));
    if (!any_sampled) return drafts;
    // The sampled walks' q rows and candidate ids go with their drafts to the verifier.
    std::vector<float> host_q(static_cast<size_t>(M * k));
    std::vector<int32_t> host_ids(static_cast<size_t>(M * k));
    ops::download(ctx_, q, TensorView::contiguous(host_q.data(), DType::F32, Device::cpu(), {n, K, k}));
    ops::download(ctx_, ids,
                  TensorView::contiguous(host_ids.data(), DType::I32, Device::cpu(), {M, k}));
    for (int64_t j = 0; j < n; ++j) {
        Sequence& s = *seqs[size_t(j)];
        if (temperature[size_t(j)] == 0.0f) continue;
        const size_t width = s.drafts.size() * size_t(k), begin = size_t(j * K * k);
        s.draft_q.assign(host_q.begin() + long(begin), host_q.begin() + long(begin + width));
        s.draft_q_ids.assign(host_ids.begin() + long(begin), host_ids.begin() + long(begin + width));
        s.draft_q_k = int(k);
    }
    return drafts;
}

void DFlashDrafter::span_rows(int64_t layer, const std::vector<Sequence*>& seqs,
                              std::vector<int32_t>& table_row, std::vector<int32_t>& begin,
                              std::vector<int32_t>& end) const {
    table_row.clear();
    begin.clear();
    end.clear();
    for (size_t j = 0; j < seqs.size(); ++j) {
        const int64_t F = seqs[j]->cached, last = F + int64_t(seqs[j]->drafts.size());
        for (int64_t p = F; p <= last; ++p) {
            const auto [b, e] = drafter_.span_for(layer, p, last);
            table_row.push_back(int32_t(j));
            begin.push_back(b);
            end.push_back(e);
        }
    }
}

void DFlashDrafter::propose(const StepPlan& plan) {
    const model::DFlashConfig& c = drafter_.config();
    std::vector<Sequence*> seqs;
    for (const StepEntry& e : plan.entries)
        if (!e.seq->drafts.empty()) {
            require(e.seq->draft_ready &&
                        int64_t(e.seq->tokens.size()) == e.seq->cached + 1,
                    "DFlashDrafter: drafts asked of a sequence without drafter context");
            seqs.push_back(e.seq);
        }
    if (seqs.empty()) return;
    if (graphs_on_ && graph_eligible(seqs)) return propose_from_graph(seqs);
    const int64_t n = int64_t(seqs.size()), H = c.hidden_size;
    // Block j: [anchor, MASK x K_j] at positions F_j .. F_j + K_j (K_j: its own draft count,
    // so its rows stay inside the KV blocks the scheduler gave its verification).
    std::vector<RowSpan> rows;
    std::vector<int32_t> positions, segments{0}, anchors, mask_rows;
    int64_t K = 0;
    for (Sequence* s : seqs) K = std::max<int64_t>(K, int64_t(s->drafts.size()));
    for (Sequence* s : seqs) {
        const int64_t F = s->cached, Kj = int64_t(s->drafts.size());
        RowSpan sp{s, F, {s->tokens.back()}, -1, false};
        sp.tokens.resize(size_t(Kj + 1), c.mask_token_id);
        for (int64_t i = 0; i <= Kj; ++i) positions.push_back(int32_t(F + i));
        const int32_t first = segments.back();
        // The selector walks K columns of every sequence: a shorter block repeats its last row.
        for (int64_t i = 0; i < K; ++i) mask_rows.push_back(first + 1 + int32_t(std::min(i, Kj - 1)));
        segments.push_back(first + int32_t(Kj + 1));
        anchors.push_back(s->tokens.back());
        rows.push_back(std::move(sp));
    }
    std::vector<int32_t> no_logits;
    model::ForwardBatch batch = build_rows_batch(ctx_, rows, no_logits, block_size_, buffers_);
    model::DFlashBlocks blocks;
    blocks.tokens = batch.tokens;
    blocks.positions = upload_i32(positions_, positions); // absolute, also for media prompts
    blocks.seqs = batch.seqs;
    blocks.host_segments = segments.data();
    blocks.segments = upload_i32(segments_, segments);
    const int64_t T = int64_t(positions.size());
    std::vector<const ops::SpanBatch*> layer_spans;
    for (size_t kind = 0; kind < spans_.size(); ++kind) {
        Spans& sb = spans_[kind];
        const int64_t layer = kind_first_layer_[kind];
        span_rows(layer, seqs, sb.table_row, sb.begin, sb.end);
        ops::SpanBatch& s = sb.batch;
        s.num_rows = int32_t(T);
        s.host_table_row = sb.table_row.data();
        s.host_key_begin = sb.begin.data();
        s.host_key_end = sb.end.data();
        s.host_block_table = batch.seqs.host_block_table;
        s.num_table_rows = int32_t(n);
        s.block_table_stride = batch.seqs.block_table_stride;
        s.block_size = batch.seqs.block_size;
        s.block_table = batch.seqs.block_table;
        s.table_row = upload_i32(sb.d_table_row, sb.table_row);
        s.key_begin = upload_i32(sb.d_begin, sb.begin);
        s.key_end = upload_i32(sb.d_end, sb.end);
    }
    for (int kind : layer_kind_) layer_spans.push_back(&spans_[size_t(kind)].batch);
    TensorView out = buffer(out_, T, H, ctx_.dtype);
    drafter_.propose(ctx_, blocks, layer_spans, cache_.views(), target_.weights(), out);
    TensorView picked = buffer(rows_, n * K, H, ctx_.dtype);
    ops::embedding(ctx_, upload_i32(row_ids_, mask_rows), out, picked); // the mask rows
    const std::vector<int32_t> drafts = choose(picked, seqs, K, anchors);
    for (int64_t j = 0; j < n; ++j) {
        auto& d = seqs[size_t(j)]->drafts;
        for (size_t i = 0; i < d.size(); ++i) d[i] = drafts[size_t(j * K) + i];
    }
}

void DFlashDrafter::observe(const StepPlan& plan, const TensorView& features, bool align_decode) {
    std::vector<RowSpan> spans;
    std::vector<int32_t> source, positions;
    std::vector<std::pair<Sequence*, int64_t>> owners;
    int32_t row = 0;
    for (const StepEntry& e : plan.entries) {
        Sequence& s = *e.seq;
        s.draft_ready = false;
        if (e.generates() && s.drafts.empty() && !align_decode) s.drafter_off = true;
        const int64_t n = e.committed;
        if (!s.drafter_off && n > 0) { // every committed row's context (its token ran)
            RowSpan sp{&s, s.cached, {}, -1, false};
            for (int64_t i = 0; i < n; ++i) {
                sp.tokens.push_back(s.tokens[size_t(s.cached + i)]);
                source.push_back(row + int32_t(i));
                positions.push_back(int32_t(s.cached + i));
            }
            spans.push_back(std::move(sp));
            owners.emplace_back(&s, n);
        }
        row += int32_t(e.rows);
    }
    if (spans.empty()) return;
    const int64_t T = int64_t(source.size()), width = features.size(1);
    TensorView rows = buffer(gathered_, T, width, ctx_.dtype);
    ops::embedding(ctx_, upload_i32(row_ids_, source), features, rows);
    std::vector<int32_t> no_logits;
    model::ForwardBatch batch = build_rows_batch(ctx_, spans, no_logits, block_size_, buffers_);
    drafter_.write_context(ctx_, rows, upload_i32(positions_, positions), batch.seqs,
                           cache_.views());
    for (auto [s, n] : owners) // ready when the context reaches the anchor (the last token)
        s->draft_ready = !s->done && s->cached + n == int64_t(s->tokens.size()) - 1;
}

} // namespace ninfer::runtime
