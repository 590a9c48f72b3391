#include "runtime/speculative/propose_graphs.h"

#include <algorithm>

#include "core/error.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/logits.h"

namespace ninfer::runtime {

struct ProposeGraphs::Slot {
    int32_t seqs = 0, k = 1; // bucket B and drafts K
    // Arguments: row ids [B], positions [(K - 1) * B] (chain step s at row s - 1), slots [B],
    // block table [B, max_blocks], row_begin [B + 1].
    GraphArg rows, positions, slots, table, row_begin;
    Tensor d_no_logits; // [1]: the chain steps' empty logit rows
    Tensor hidden_in, chain[2], lse, top, ids; // ids [K * B]: draft i of sequence j at i * B + j
    std::vector<model::ForwardBatch> steps;    // chain steps 1..K-1
    GraphReplay replay;
};

ProposeGraphs::ProposeGraphs(const ops::ExecContext& ctx, model::Qwen35Model& model,
                             const DecodeGraphs::Layout& layout, int64_t token_limit,
                             const ProposalHead& head)
    : ctx_(ctx), model_(model), layout_(layout), token_limit_(token_limit), head_(head) {
    logits_ = Tensor::empty(ops::device_allocator(ctx.device), DType::F32,
                            {kMaxSeqs, head.rows()});
}

ProposeGraphs::~ProposeGraphs() = default;

bool ProposeGraphs::eligible(const std::vector<Sequence*>& seqs) const {
    const int32_t n = int32_t(seqs.size());
    if (n == 0 || n > kMaxSeqs) return false;
    const size_t k = seqs.front()->drafts.size();
    if (k == 0 || k > size_t(kMaxDrafts)) return false;
    for (const Sequence* s : seqs)
        if (s->drafts.size() != k || int32_t(s->blocks.size()) > layout_.max_blocks_per_seq ||
            s->media) // media sequences: their rows' positions are mRoPE's (eager path)
            return false;
    return model_.capturable(ctx_, DecodeGraphs::bucket_for(n));
}

ProposeGraphs::Slot& ProposeGraphs::slot_for(int32_t B, int32_t K) {
    auto& slot = slots_[{B, K}];
    if (slot) return *slot;
    slot = std::make_unique<Slot>();
    Slot& s = *slot;
    s.seqs = B;
    s.k = K;
    Allocator& a = ops::device_allocator(ctx_.device);
    const int64_t H = model_.config().hidden_size, M = layout_.max_blocks_per_seq;
    s.rows.allocate(ctx_, B);
    s.positions.allocate(ctx_, int64_t(K - 1) * B);
    s.slots.allocate(ctx_, B);
    s.table.allocate(ctx_, B * M);
    s.row_begin.allocate(ctx_, B + 1);
    s.d_no_logits = Tensor::empty(a, DType::I32, {1});
    s.hidden_in = Tensor::empty(a, ctx_.dtype, {B, H});
    for (Tensor& c : s.chain) c = Tensor::empty(a, ctx_.dtype, {B, H});
    s.lse = Tensor::empty(a, DType::F32, {B});
    s.top = Tensor::empty(a, DType::F32, {B, 1});
    s.ids = Tensor::empty(a, DType::I32, {int64_t(K) * B});
    s.row_begin.host.resize(size_t(B) + 1);
    for (int32_t i = 0; i <= B; ++i) s.row_begin.host[size_t(i)] = i;
    s.row_begin.upload(ctx_);
    s.table.host.assign(size_t(B * M), 0);
    s.positions.host.assign(size_t(K - 1) * size_t(B), 0);
    // Chain step st (1..K-1): one row per sequence at positions[(st - 1) * B + j], its token the
    // previous step's argmax (ids row st - 1).
    for (int32_t st = 1; st < K; ++st) {
        model::ForwardBatch b;
        const int64_t off = int64_t(st - 1) * B;
        b.tokens = s.ids.view().narrow(0, off, B);
        b.positions = s.positions.view().narrow(0, off, B);
        b.logit_rows = s.d_no_logits.view().narrow(0, 0, 0);
        ops::SeqBatch& q = b.seqs;
        q.num_seqs = B;
        q.num_rows = B;
        q.max_rows_per_seq = 1;
        q.max_context = layout_.max_context;
        q.block_table_stride = int32_t(M);
        q.block_size = layout_.block_size;
        q.row_begin = s.row_begin.view(B + 1);
        q.pos_begin = b.positions;
        q.state_slot = s.slots.view(B);
        q.block_table = s.table.view(B * M).reshape({B, M});
        q.host_row_begin = s.row_begin.host.data();
        q.host_pos_begin = s.positions.host.data() + off;
        q.host_state_slot = nullptr; // set by fill (the vector is resized there once)
        q.host_block_table = s.table.host.data();
        s.steps.push_back(b);
    }
    return s;
}

void ProposeGraphs::fill(Slot& s, const std::vector<Sequence*>& seqs) {
    const int32_t B = s.seqs, K = s.k, n = int32_t(seqs.size());
    const int64_t M = layout_.max_blocks_per_seq;
    s.rows.host.assign(size_t(B), 0);
    s.slots.host.assign(size_t(B), layout_.padding_row);
    std::fill(s.table.host.begin(), s.table.host.end(), 0);
    std::vector<int32_t>& positions = s.positions.host;
    for (int32_t j = 0; j < B; ++j) {
        if (j >= n) { // padding: row 0 of the first hidden rows, the padding block
            s.table.host[size_t(j * M)] = layout_.padding_block;
            for (int32_t st = 1; st < K; ++st) positions[size_t((st - 1) * B + j)] = st - 1;
            continue;
        }
        const Sequence& q = *seqs[size_t(j)];
        s.rows.host[size_t(j)] = q.draft_row;
        s.slots.host[size_t(j)] = q.slot;
        std::copy(q.blocks.begin(), q.blocks.end(), s.table.host.begin() + j * M);
        // Chain step st runs at position cached + st - 1 (mtp_drafter.h).
        for (int32_t st = 1; st < K; ++st)
            positions[size_t((st - 1) * B + j)] = int32_t(q.cached + st - 1);
    }
    // Positions are empty for K = 1 (no chain step): upload skips them.
    for (GraphArg* arg : {&s.rows, &s.slots, &s.table, &s.positions}) arg->upload(ctx_);
    for (model::ForwardBatch& b : s.steps) b.seqs.host_state_slot = s.slots.host.data();
}

void ProposeGraphs::greedy(Slot& s, const TensorView& rows, const TensorView& ids) {
    const int64_t B = s.seqs;
    TensorView logits = logits_.view().narrow(0, 0, B);
    head_.project(ctx_, rows, logits);
    ops::logprobs_top_k(ctx_, logits, token_limit_, s.lse.view(), ids.reshape({B, 1}),
                        s.top.view());
}

void ProposeGraphs::body(Slot& s, const model::CacheViews& caches) {
    const int64_t B = s.seqs;
    TensorView hidden = s.hidden_in.view();
    greedy(s, hidden, s.ids.view().narrow(0, 0, B));
    for (int32_t st = 1; st < s.k; ++st) {
        TensorView out = s.chain[st % 2].view();
        model_.mtp_forward(ctx_, s.steps[size_t(st - 1)], hidden, caches, out, TensorView());
        greedy(s, out, s.ids.view().narrow(0, int64_t(st) * B, B));
        hidden = out;
    }
}

bool ProposeGraphs::warm(int32_t B, int32_t K, const model::CacheViews& caches) {
    if (B < 1 || B > kMaxSeqs || B != DecodeGraphs::bucket_for(B) || K < 1 || K > kMaxDrafts ||
        !model_.capturable(ctx_, B))
        return false;
    Slot& s = slot_for(B, K);
    fill(s, {});
    ops::fill_zero(ctx_, s.hidden_in.view()); // finite rows: their drafts index embeddings
    s.replay.warm(ctx_, model_.scratch_generation(), [&] { body(s, caches); });
    return true;
}

void ProposeGraphs::run(const std::vector<Sequence*>& seqs, const TensorView& first_hidden,
                        const model::CacheViews& caches) {
    require(eligible(seqs), "ProposeGraphs::run: the drafts cannot run from a graph");
    const int32_t n = int32_t(seqs.size()), K = int32_t(seqs.front()->drafts.size());
    Slot& s = slot_for(DecodeGraphs::bucket_for(n), K);
    fill(s, seqs);
    // The first drafts' hidden rows, gathered outside the graph (their buffer may move).
    ops::embedding(ctx_, s.rows.view(s.seqs), first_hidden, s.hidden_in.view());
    runs_.count(s.replay.run(ctx_, model_.scratch_generation(), [&] { body(s, caches); }));
    const int64_t B = s.seqs;
    std::vector<int32_t> host(size_t(K * B), 0);
    ops::download(ctx_, s.ids.view().narrow(0, 0, K * B),
                  TensorView::contiguous(host.data(), DType::I32, Device::cpu(), {K * B}));
    for (int32_t j = 0; j < n; ++j)
        for (int32_t i = 0; i < K; ++i)
            seqs[size_t(j)]->drafts[size_t(i)] = host[size_t(i * B + j)];
}

} // namespace ninfer::runtime
