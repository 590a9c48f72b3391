#include "runtime/scheduler/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace ninfer::runtime {
namespace {

// Scheduling order: lower priority value first, then arrival.
bool runs_before(const Sequence& a, const Sequence& b) {
    if (a.request.priority != b.request.priority) return a.request.priority < b.request.priority;
    return a.arrival < b.arrival;
}

} // namespace

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager& blocks, SnapshotCache* snapshots,
                     DraftPolicy* policy)
    : config_(config), blocks_(blocks), snapshots_(snapshots), policy_(policy) {
    require(config.max_sequences >= 1 && config.max_batch_tokens >= 1 && config.prefill_chunk >= 1,
            "Scheduler: sequences, batch tokens and prefill chunk must be positive");
    require(config.snapshot_stride >= 0, "Scheduler: negative snapshot stride");
    for (int32_t s = config.max_sequences - 1; s >= 0; --s) free_slots_.push_back(s);
}

void Scheduler::insert_sorted(std::vector<std::unique_ptr<Sequence>>& list,
                              std::unique_ptr<Sequence> seq) {
    const auto at = std::upper_bound(list.begin(), list.end(), seq,
                                     [](const auto& a, const auto& b) { return runs_before(*a, *b); });
    list.insert(at, std::move(seq));
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
    require(seq && seq->slot < 0 && !seq->done, "Scheduler::add: a new sequence expected");
    insert_sorted(waiting_, std::move(seq));
}

int64_t Scheduler::chunk_rows(const Sequence& seq, int64_t budget, bool others_wait) const {
    const int64_t n = int64_t(seq.tokens.size()), pending = n - seq.cached;
    int64_t rows = std::min({pending, config_.prefill_chunk, budget});
    const int64_t stride = snapshots_ ? config_.snapshot_stride : 0;
    if (stride > 0 && pending > 1) { // end the chunk on the next snapshot boundary
        const int64_t next = (seq.cached / stride + 1) * stride;
        if (next < n) rows = std::min(rows, next - seq.cached);
    }
    // The prompt's snapshot is taken before its last token, so the same prompt sent again hits
    // it (a hit must leave one row to compute): the last prompt token runs as a row of its own.
    const int64_t before_last = seq.prompt_length() - 1;
    if (snapshots_ && seq.cached < before_last) rows = std::min(rows, before_last - seq.cached);
    // The request's cache boundary (the start of a chat prompt's generation prompt) ends a chunk.
    const int64_t boundary = seq.request.cache_boundary;
    if (snapshots_ && seq.cached < boundary && boundary < before_last)
        rows = std::min(rows, boundary - seq.cached);
    // A long prompt that would take the whole remaining budget leaves half of it to others.
    if (others_wait && rows == budget && rows < pending && budget > 1) rows = budget / 2;
    return rows;
}

Sequence* Scheduler::worst_running() {
    return running_.empty() ? nullptr : running_.back().get();
}

void Scheduler::preempt(Sequence& victim, int64_t& budget) {
    budget += victim.step_rows;
    victim.step_rows = 0;
    blocks_.release(victim.blocks);
    victim.blocks.clear();
    free_slots_.push_back(victim.slot);
    victim.slot = -1;
    victim.cached = 0;
    victim.draft_ready = false;
    victim.drafts.clear();
    ++victim.preemptions;
    ++stats_.preemptions;
    auto it = std::find_if(running_.begin(), running_.end(),
                           [&](const auto& s) { return s.get() == &victim; });
    std::unique_ptr<Sequence> owned = std::move(*it);
    running_.erase(it);
    insert_sorted(waiting_, std::move(owned));
}

// Blocks for tokens[0, tokens) of seq; evicts prefix-cache entries, then preempts the worst
// running sequence, until they fit. False when seq itself was preempted.
bool Scheduler::grow(Sequence& seq, int64_t tokens, int64_t& budget) {
    const int64_t need = blocks_.blocks_for(tokens) - int64_t(seq.blocks.size());
    if (need <= 0) return true;
    while (blocks_.free_blocks() < need) {
        if (snapshots_ && blocks_.cache_only_blocks() > 0 && snapshots_->evict_one()) continue;
        Sequence* victim = worst_running();
        preempt(*victim, budget);
        if (victim == &seq) return false;
    }
    const std::vector<int32_t> more = blocks_.allocate(need);
    seq.blocks.insert(seq.blocks.end(), more.begin(), more.end());
    return true;
}

// Marks the waiting prefill_only requests whose prompt `admitted` extends as superseded (the
// server's warm request of a turn whose follow-up came before it ran).
void Scheduler::supersede_warms(const Sequence& admitted) {
    for (const auto& w : waiting_)
        if (w->request.prefill_only && w->tokens.size() <= admitted.tokens.size() &&
            std::equal(w->tokens.begin(), w->tokens.end(), admitted.tokens.begin()))
            w->superseded = true;
}

// Admits the head of the queue (or preempts a worse running sequence for it): true when the
// caller may try again.
bool Scheduler::admit_head(int64_t& budget, CacheOps& ops) {
    Sequence& seq = *waiting_.front();
    Sequence* worst = worst_running();
    // Only a strictly better priority preempts: equal ones keep arrival order.
    const bool may_preempt = worst && seq.request.priority < worst->request.priority;
    if (free_slots_.empty()) {
        if (!may_preempt) return false;
        preempt(*worst, budget);
        return true;
    }
    // The deepest prefix-cache entry (not for prompt scoring: every prompt row is wanted).
    std::optional<uint64_t> hit;
    if (snapshots_ && !seq.request.prompt_logprobs)
        hit = snapshots_->lookup(seq.cache_tokens(), int64_t(seq.tokens.size()) - 1);
    const int64_t bs = blocks_.block_size();
    const int64_t p = hit ? snapshots_->get(*hit).length() : 0;
    std::vector<int32_t> shared;
    int32_t partial = -1, row = -1, host = -1; // the hit's data, read before any eviction
    if (hit) {
        snapshots_->touch(*hit); // most recent: evicted last
        const Snapshot& snap = snapshots_->get(*hit);
        shared.assign(snap.blocks.begin(), snap.blocks.begin() + p / bs);
        if (p % bs != 0) partial = snap.blocks[size_t(p / bs)];
        row = snap.device_row;
        host = snap.host_buffer;
    }
    for (int32_t b : shared) blocks_.retain(b); // no longer reclaimable
    seq.cached = p;
    const int64_t rows = chunk_rows(seq, budget, waiting_.size() > 1);
    const int64_t need = blocks_.blocks_for(p + rows) - int64_t(shared.size());
    if (blocks_.free_blocks() + blocks_.cache_only_blocks() < need) {
        blocks_.release(shared);
        seq.cached = 0;
        if (!may_preempt) return false;
        preempt(*worst, budget);
        return true;
    }
    // Evicting (even the hit) only returns ids: the setup ops copy the hit's data before the
    // forward writes any block or row handed out again.
    while (blocks_.free_blocks() < need)
        if (!snapshots_->evict_one()) break;
    seq.blocks = shared;
    const std::vector<int32_t> fresh = blocks_.allocate(need);
    seq.blocks.insert(seq.blocks.end(), fresh.begin(), fresh.end());
    seq.slot = free_slots_.back();
    free_slots_.pop_back();
    if (hit) {
        if (partial >= 0 && partial != seq.blocks[size_t(p / bs)]) // private: seq writes past p
            ops.push_back({CacheOp::Kind::CopyBlock, partial, seq.blocks[size_t(p / bs)]});
        if (row >= 0)
            ops.push_back({CacheOp::Kind::CopySlot, row, seq.slot});
        else
            ops.push_back({CacheOp::Kind::HostToSlot, host, seq.slot});
    } else {
        ops.push_back({CacheOp::Kind::ZeroSlot, -1, seq.slot});
    }
    if (!seq.admitted_once) {
        seq.admitted_once = true;
        seq.cached_tokens = std::min(p, seq.prompt_length());
        if (seq.request.prefill_only) { // warming: not a lookup of anyone's prompt
            stats_.prefill_only_tokens += seq.prompt_length() - seq.cached_tokens;
        } else {
            stats_.prefix_query_tokens += seq.prompt_length();
            stats_.prefix_hit_tokens += seq.cached_tokens;
        }
    }
    seq.step_rows = rows;
    budget -= rows;
    if (!seq.request.prefill_only) supersede_warms(seq);
    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.erase(waiting_.begin());
    insert_sorted(running_, std::move(owned));
    return true;
}

// Draft rows for a decoding sequence that already has its decode row: up to k, within its
// remaining tokens (the last accepted draft plus the bonus must not pass max_new_tokens), the
// context and the budget, and only blocks that are free now (drafts never evict or preempt).
int32_t Scheduler::draft_rows(Sequence& seq, int k, int64_t budget) {
    if (k <= 0 || !seq.draft_ready || seq.drafter_off || seq.request.prompt_logprobs) return 0;
    int64_t n = std::min<int64_t>(k, seq.request.max_new_tokens - seq.generated - 1);
    if (config_.max_context > 0) n = std::min(n, config_.max_context - seq.cached - 1);
    n = std::min(n, budget);
    int64_t need = 0; // blocks to add for n drafts
    for (; n > 0; --n) {
        need = blocks_.blocks_for(seq.cached + 1 + n) - int64_t(seq.blocks.size());
        if (need <= blocks_.free_blocks()) break;
    }
    if (n <= 0) return 0;
    if (need > 0) {
        const std::vector<int32_t> more = blocks_.allocate(need);
        seq.blocks.insert(seq.blocks.end(), more.begin(), more.end());
    }
    return int32_t(n);
}

Scheduler::Step Scheduler::schedule() {
    Step step;
    int64_t budget = config_.max_batch_tokens;
    std::vector<Sequence*> order;
    int64_t decoding = 0;
    for (auto& s : running_) {
        s->step_rows = 0;
        s->drafts.clear();
        s->draft_q_k = 0;
        order.push_back(s.get());
        decoding += s->slot >= 0 && s->pending_rows() == 1;
    }
    const int k = policy_ && decoding > 0 ? policy_->choose(decoding) : 0;
    draft_tokens_ = k;
    int32_t groups = config_.verify_groups;
    for (Sequence* s : order) { // decode rows first: running requests never stall
        if (budget == 0) break;
        if (s->slot < 0 || s->pending_rows() != 1 || !grow(*s, s->cached + 1, budget)) continue;
        s->step_rows = 1;
        --budget;
        const int32_t drafts = groups > 0 ? draft_rows(*s, k, budget) : 0;
        if (drafts > 0) {
            s->drafts.assign(size_t(drafts), -1);
            s->step_rows += drafts;
            budget -= drafts;
            --groups;
        }
    }
    for (Sequence* s : order) { // then the running prompts' next chunks
        if (budget == 0) break;
        if (s->slot < 0 || s->pending_rows() <= 1) continue;
        const int64_t rows = chunk_rows(*s, budget, !waiting_.empty());
        if (!grow(*s, s->cached + rows, budget)) continue;
        s->step_rows = rows;
        budget -= rows;
    }
    // A superseded warm (at the queue's tail: the lowest priority) waits for the engine to end
    // it (drop_cancelled, next step).
    while (budget > 0 && !waiting_.empty() && !waiting_.front()->superseded)
        if (!admit_head(budget, step.setup)) break;
    // A sequence that does not run this step loses its drafter context (the drafter's output
    // rows are only kept until the next step).
    for (auto& s : running_)
        if (s->step_rows == 0) s->draft_ready = false;
    step.plan = build_plan();
    if (!step.plan.entries.empty()) {
        ++stats_.steps;
        stats_.max_step_sequences =
            std::max(stats_.max_step_sequences, int64_t(step.plan.entries.size()));
    }
    return step;
}

StepPlan Scheduler::build_plan() const {
    StepPlan plan;
    int32_t verify_group = 0;
    for (const auto& owned : running_) {
        Sequence* seq = owned.get();
        const int64_t rows = seq->step_rows;
        if (rows == 0) continue;
        StepEntry entry{seq, rows};
        entry.committed = rows;
        if (!seq->drafts.empty()) entry.verify_group = verify_group++;
        plan.entries.push_back(entry);
        if (seq->cached + entry.own_rows() == int64_t(seq->tokens.size()))
            plan.logit_seqs.push_back(seq);
        if (seq->request.prompt_logprobs) { // rows of prompt positions p <= n - 2 score p + 1
            const int64_t count =
                std::min(seq->cached + rows, seq->prompt_length() - 1) - seq->cached;
            if (count > 0) plan.scored.push_back({plan.entries.size() - 1, count});
        }
    }
    return plan;
}

CacheOps Scheduler::after_forward(const StepPlan& plan) {
    CacheOps ops;
    for (const StepEntry& e : plan.entries) {
        Sequence& s = *e.seq;
        s.cached += e.committed;
        s.step_rows = 0;
        const bool verified = !s.drafts.empty();
        s.drafts.clear();
        if (!snapshots_) continue;
        const int64_t p = s.cached, stride = config_.snapshot_stride;
        // (A prefill_only request keeps only its end, where it finishes: one state row, not two.)
        const bool prompt_end =
            (p == s.prompt_length() - 1 && !s.request.prefill_only) ||
            (p == s.request.cache_boundary && p < s.prompt_length());
        const bool on_stride =
            stride > 0 && p % stride == 0 &&
            (p <= s.prompt_length() || (e.committed > 1 && !verified));
        const int64_t decode_stride = config_.decode_snapshot_stride;
        // Not with speculation: a drafter's context trails the commit (it is written for the
        // prefix the text layer keeps), so only a finished generation's state is whole.
        const bool on_decode_stride = decode_stride > 0 && !policy_ && p > s.prompt_length() &&
                                      p % decode_stride == 0;
        if (prompt_end || on_stride || on_decode_stride)
            snapshots_->insert(s.cache_tokens().data(), p, s.blocks, s.slot, ops);
    }
    return ops;
}

CacheOps Scheduler::finish(Sequence& seq, bool snapshot) {
    CacheOps ops;
    if (seq.slot >= 0) {
        if (snapshot && snapshots_ && seq.cached > 0)
            snapshots_->insert(seq.cache_tokens().data(), seq.cached, seq.blocks, seq.slot, ops);
        // A failed sequence's K/V may hold non-finite values, and attention reads the rows of a
        // reused block past its next owner's context (ops/attention.h): they go back zeroed.
        for (int32_t b : blocks_.release(seq.blocks))
            if (!snapshot) ops.push_back({CacheOp::Kind::ZeroBlock, -1, b});
        seq.blocks.clear();
        free_slots_.push_back(seq.slot);
        seq.slot = -1;
    }
    seq.done = true;
    return ops;
}

void Scheduler::collect() {
    std::erase_if(running_, [](const auto& s) { return s->done; });
    std::erase_if(waiting_, [](const auto& s) { return s->done; });
}

} // namespace ninfer::runtime
