// The engine thread: takes submitted requests, asks the scheduler for each step, runs its cache
// ops and the forward, samples, streams tokens and ends requests.
#include <algorithm>

#include "core/error.h"
#include "ops/logits.h"
#include "ops/memory.h"
#include "runtime/engine_impl.h"

namespace ninfer {

using runtime::Sequence;

namespace {

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

} // namespace

bool Engine::Impl::has_work() const {
    return !scheduler->running().empty() || !scheduler->waiting().empty();
}

void Engine::Impl::loop() {
    ops::bind_device(ctx);
    ops::set_cpu_threads(options.threads); // OpenMP thread counts are per calling thread
    for (;;) {
        {
            std::unique_lock lock(mutex);
            wake.wait(lock, [&] { return stopping || !incoming.empty() || has_work(); });
            if (stopping) break;
        }
        try {
            take_incoming();
            drop_cancelled();
            if (has_work()) step();
        } catch (const std::exception& e) {
            fail_all(e.what());
        }
        publish_stats();
    }
    take_incoming();
    for (const auto* list : {&scheduler->running(), &scheduler->waiting()})
        for (const auto& seq : *list) finish(*seq, FinishReason::Cancelled);
    scheduler->collect();
}

void Engine::Impl::take_incoming() {
    std::deque<std::unique_ptr<Sequence>> taken;
    {
        std::lock_guard lock(mutex);
        taken.swap(incoming);
    }
    for (auto& seq : taken) {
        seq->arrival = next_arrival++;
        scheduler->add(std::move(seq));
    }
}

void Engine::Impl::publish_stats() {
    EngineStats s;
    s.waiting = int64_t(scheduler->waiting().size());
    {
        std::lock_guard lock(mutex);
        s.waiting += int64_t(incoming.size());
    }
    s.active = int64_t(scheduler->running().size());
    s.kv_blocks_total = blocks->num_blocks();
    s.kv_blocks_used = blocks->used_blocks();
    s.kv_blocks_cached = blocks->cache_only_blocks();
    s.state_slots_total = memory.sequences;
    s.state_slots_used = memory.sequences - scheduler->free_slots();
    if (snapshots) {
        s.snapshots_device = snapshots->on_device();
        s.snapshots_device_total = snapshots->device_capacity();
        s.snapshots_host = snapshots->on_host();
    }
    const runtime::SchedulerStats& st = scheduler->stats();
    s.prefix_query_tokens = st.prefix_query_tokens;
    s.prefix_hit_tokens = st.prefix_hit_tokens;
    s.prefill_only_tokens = st.prefill_only_tokens;
    s.preemptions = st.preemptions;
    s.steps = st.steps;
    s.max_step_sequences = st.max_step_sequences;
    s.max_batch_tokens = options.max_batch_tokens;
    s.kv_capacity_tokens = memory.kv_tokens();
    s.step_scratch_bytes = step_scratch_bytes;
    s.kv_dtype = ops::kv_dtype_name(memory.kv_dtype, ctx.dtype);
    s.gdn_state_dtype = gdn_state_dtype == DType::BF16 ? "bf16" : "f32";
    s.speculative = options.speculative;
    s.speculation = spec_totals;
    s.draft_tokens = last_draft_tokens;
    if (graphs) {
        s.graph_replays = graphs->replays();
        s.graph_verify_replays = graphs->verify_replays();
        s.graph_warmups = graphs->warmups();
    }
    if (drafter) {
        s.draft_graph_replays = drafter->graph_replays();
        s.observe_graph_replays = drafter->observe_graph_replays();
        s.graph_warmups += drafter->graph_warmups();
    }
    std::lock_guard lock(stats_mutex);
    published = s;
}

// Fills seq.allowed from its request's constraint; false (the request ends after this step)
// when the constraint failed or allows nothing.
bool Engine::Impl::constrain(Sequence& seq) {
    std::string error;
    try {
        seq.allowed.assign(size_t(info.token_limit), 0);
        seq.request.constraint->allowed(seq.allowed);
        if (std::find(seq.allowed.begin(), seq.allowed.end(), uint8_t(1)) != seq.allowed.end())
            return true;
        error = "the token constraint allows no token";
    } catch (const std::exception& e) {
        error = concat("token constraint failed: ", e.what());
    }
    end_after_step(seq, FinishReason::Error, error);
    return false;
}

void Engine::Impl::drop_cancelled() {
    for (const auto* list : {&scheduler->running(), &scheduler->waiting()})
        for (const auto& seq : *list)
            if (seq->stream->cancel_requested || seq->superseded)
                finish(*seq, FinishReason::Cancelled);
    scheduler->collect();
}

namespace {

// The engine's side of verification: sampling inputs and token commits.
struct EngineSink : runtime::TokenSink {
    Engine::Impl& impl;
    explicit EngineSink(Engine::Impl& i) : impl(i) {}

    std::optional<runtime::SampleInput> prepare(Sequence& seq, int64_t position) override {
        const bool masked = seq.request.constraint != nullptr && seq.request.max_new_tokens > 0;
        if (masked && !impl.constrain(seq)) return std::nullopt;
        runtime::SampleInput in{&seq.request.sampling, seq.seed,          position,
                                seq.request.top_logprobs, &seq.prompt_set, &seq.output_counts,
                                masked ? &seq.allowed : nullptr};
        // position indexes seq.tokens: the prompt's tokens come first.
        if (position - int64_t(seq.request.prompt.size()) < seq.request.min_new_tokens)
            in.banned = &seq.stop_ids;
        return in;
    }
    bool accept(Sequence& seq, const runtime::SampleOutput& out) override {
        if (seq.request.max_new_tokens == 0) { // prompt scoring or prefill_only: no token wanted
            impl.end_after_step(seq, FinishReason::Length);
            return false;
        }
        return impl.accept_token(seq, out);
    }
};

} // namespace

void Engine::Impl::run_forward(runtime::StepPlan& plan, TensorView& logits, TensorView& hidden) {
    const int64_t H = model->config().hidden_size;
    if (graphs && graphs->graph_width(plan) > 0) {
        logits = graphs->run(plan, cache->views());
        // A step that warmed up or captured a graph is no measure of what the step costs.
        step_timing_valid = graphs->last_replayed();
        if (drafter) hidden = graphs->hidden(logits.size(0));
        return;
    }
    // The vision tower runs for the media this step's prompt rows reach (batched across them),
    // and the next token's: the MTP drafter's row p embeds token p + 1.
    std::vector<runtime::MediaNeed> needs;
    for (const auto& e : plan.entries)
        if (e.seq->media)
            needs.push_back({e.seq, e.seq->cached, e.seq->cached + e.own_rows() + 1});
    if (!needs.empty()) runtime::encode_media(ctx, *model, *media_cache, needs);
    model::ForwardBatch batch =
        runtime::build_forward_batch(ctx, plan, options.kv_block_size, buffers, verify_rows);
    if (drafter) {
        batch.feature_layers = drafter->feature_layers();
        const int64_t taps = int64_t(batch.feature_layers.size());
        hidden = runtime::hidden_view(ctx, buffers, batch.tokens.size(0), H * std::max<int64_t>(1, taps));
        if (taps > 0)
            batch.features = hidden;
        else
            batch.hidden_out = hidden;
    }
    logits = buffers.logits_view(ctx, size_t(plan.sample_rows() + plan.scored_rows()),
                                 info.vocab_size);
    model->forward(ctx, batch, cache->views(), logits);
}

// Rolls each verifying sequence's GDN state back to its committed rows: the state after row
// committed - 1 is in its verification rows unless every row stayed.
runtime::CacheOps Engine::Impl::commit_verified(const runtime::StepPlan& plan) const {
    runtime::CacheOps ops;
    for (const auto& e : plan.entries)
        if (e.verify_group >= 0 && e.committed < e.rows && e.seq->slot >= 0)
            ops.push_back({runtime::CacheOp::Kind::CopySlot,
                           verify_rows.base + e.verify_group * verify_rows.per_group +
                               int32_t(e.committed) - 1,
                           e.seq->slot});
    return ops;
}

void Engine::Impl::step() {
    const auto started = Clock::now();
    profile.begin(ctx);
    runtime::Scheduler::Step st = scheduler->schedule();
    cache->run(st.setup);
    runtime::StepPlan& plan = st.plan;
    if (plan.entries.empty()) return;
    profile.mark(ctx, runtime::StepProfile::Schedule);
    const auto now = Clock::now();
    bool all_decode = true;
    for (const auto& e : plan.entries) {
        if (!e.seq->has_scheduled) {
            e.seq->has_scheduled = true;
            e.seq->scheduled = now;
        }
        all_decode &= e.own_rows() == 1;
    }
    const bool drafting = plan.drafts();
    // For the step trace (before commits).
    int64_t traced_rows = 0, traced_decoding = 0, traced_drafting = 0;
    if (profile.tracing())
        for (const auto& e : plan.entries) {
            traced_rows += e.rows;
            traced_decoding += e.generates();
            traced_drafting += !e.seq->drafts.empty();
        }
    // The drafter's graph warm-ups before the step: one during it (an eager first run or a
    // capture) makes the step's time no measure of what drafting costs.
    const int64_t draft_warmups = drafter ? drafter->graph_warmups() : 0;
    if (drafting) drafter->propose(plan);
    profile.mark(ctx, runtime::StepProfile::Propose);
    TensorView logits, hidden;
    step_timing_valid = true;
    run_forward(plan, logits, hidden);
    profile.mark(ctx, runtime::StepProfile::Forward);
    const int64_t sample_rows = plan.sample_rows();
    if (!plan.scored.empty())
        score_prompts(plan, logits.narrow(0, sample_rows, plan.scored_rows()));
    EngineSink sink(*this);
    verifier->run(plan, logits.narrow(0, 0, sample_rows), sink, policy.get(), spec_totals);
    profile.mark(ctx, runtime::StepProfile::Verify);
    // A plain step's time for the policy leaves its MTP alignment out: the policy compares
    // drafting with plain decoding as it runs once it settles, without alignment (the sampler
    // synchronised already, so timing the alignment costs one more synchronisation).
    double alignment_s = 0;
    if (drafter) {
        int64_t decoding = 0;
        for (const auto& e : plan.entries) decoding += e.generates();
        const bool align = decoding == 0 || policy->aligned(decoding);
        const auto before = Clock::now();
        drafter->observe(plan, hidden, align);
        if (!drafting && all_decode && align) {
            ops::synchronize(ctx);
            alignment_s = seconds(Clock::now() - before);
        }
    }
    profile.mark(ctx, runtime::StepProfile::Observe);
    cache->run(commit_verified(plan));
    cache->run(scheduler->after_forward(plan));
    for (const Ending& e : endings) finish(*e.seq, e.reason, e.error);
    endings.clear();
    profile.mark(ctx, runtime::StepProfile::Commit);
    if (profile.enabled())
        profile.end(drafting     ? runtime::StepProfile::Verification
                    : all_decode ? runtime::StepProfile::Decode
                                 : runtime::StepProfile::Other,
                    plan.entries.size(), traced_rows, traced_decoding, scheduler->draft_tokens(),
                    traced_drafting);
    if (policy) {
        const int64_t k = drafting ? scheduler->draft_tokens() : 0;
        if (drafting) last_draft_tokens = k;
        if (all_decode && step_timing_valid &&
            (!drafter || drafter->graph_warmups() == draft_warmups))
            policy->record_step(int64_t(plan.entries.size()), int(k),
                                seconds(Clock::now() - started) - alignment_s);
    }
    scheduler->collect();
}

// The log-probability of the prompt token after each scored row: its logit minus the row's
// log-sum-exp (the full softmax of the raw logits, as for generated tokens).
void Engine::Impl::score_prompts(const runtime::StepPlan& plan, const TensorView& rows) {
    const int64_t R = rows.size(0);
    Tensor lse = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {R});
    ops::logprobs_top_k(ctx, rows, info.token_limit, lse.view(), TensorView(), TensorView());
    std::vector<float> lse_h(size_t(R), 0.0f), one(1);
    ops::download(ctx, lse.view(),
                  TensorView::contiguous(lse_h.data(), DType::F32, Device::cpu(), {R}));
    int64_t r = 0;
    for (const auto& sc : plan.scored) {
        Sequence& seq = *plan.entries[sc.entry].seq;
        std::vector<TokenLogprob> scores;
        for (int64_t i = 0; i < sc.count; ++i, ++r) {
            const int64_t position = seq.cached + i;
            if (position < seq.prompt_scored) continue; // reported before a preemption
            seq.prompt_scored = position + 1;
            const int32_t id = seq.tokens[size_t(position + 1)];
            ops::download(ctx, rows.narrow(0, r, 1).narrow(1, id, 1).reshape({1}),
                          TensorView::contiguous(one.data(), DType::F32, Device::cpu(), {1}));
            scores.push_back({id, ops::logprob_of(one[0], lse_h[size_t(r)])});
        }
        {
            std::lock_guard lock(seq.stream->mutex);
            auto& pending = seq.stream->pending_prompt;
            pending.insert(pending.end(), scores.begin(), scores.end());
        }
        seq.stream->ready.notify_all();
    }
}

// Commits one sampled token to its sequence and stream; false when the request ends with it
// (it is finished after the step).
bool Engine::Impl::accept_token(Sequence& seq, const runtime::SampleOutput& out) {
    if (out.non_finite) {
        end_after_step(seq, FinishReason::Error,
                       concat("non-finite logits at position ", seq.tokens.size(),
                              ": the request was stopped"));
        return false;
    }
    const int32_t id = out.token.id;
    if (seq.request.constraint) {
        try {
            seq.request.constraint->accept(id);
        } catch (const std::exception& e) {
            end_after_step(seq, FinishReason::Error, concat("token constraint failed: ", e.what()));
            return false;
        }
    }
    seq.append_token(id);
    ++seq.generated;
    ++seq.output_counts[id];
    if (!seq.has_first_token) {
        seq.has_first_token = true;
        seq.first_token = Clock::now();
    }
    {
        std::lock_guard lock(seq.stream->mutex);
        seq.stream->pending.push_back(out.token);
    }
    seq.stream->ready.notify_all();
    if (seq.stop_ids.count(id)) {
        end_after_step(seq, FinishReason::Stop);
        return false;
    }
    if (seq.generated >= seq.request.max_new_tokens ||
        int64_t(seq.tokens.size()) >= info.max_context) {
        end_after_step(seq, FinishReason::Length);
        return false;
    }
    return true;
}

void Engine::Impl::end_after_step(Sequence& seq, FinishReason reason, const std::string& error) {
    endings.push_back({&seq, reason, error});
}

// Ends a request: a resident sequence leaves its state to the prefix cache (unless it failed)
// and frees its slot and blocks; the stream gets the reason and the timings.
void Engine::Impl::finish(Sequence& seq, FinishReason reason, const std::string& error) {
    if (seq.done) return;
    if (seq.slot >= 0)
        cache->run(scheduler->finish(seq, reason != FinishReason::Error));
    seq.done = true;
    const auto now = Clock::now();
    RequestTimings t;
    t.prompt_tokens = int(seq.prompt_length());
    t.generated_tokens = int(seq.generated);
    t.cached_tokens = int(seq.cached_tokens);
    t.preemptions = seq.preemptions;
    t.speculative = seq.spec;
    if (seq.has_scheduled) t.queued_s = seconds(seq.scheduled - seq.submitted);
    if (seq.has_first_token) {
        t.first_token_s = seconds(seq.first_token - seq.submitted);
        t.prefill_s = seconds(seq.first_token - seq.scheduled);
        t.decode_s = seconds(now - seq.first_token);
    }
    {
        std::lock_guard lock(seq.stream->mutex);
        seq.stream->finished = true;
        seq.stream->reason = reason;
        seq.stream->error = error;
        seq.stream->timings = t;
    }
    seq.stream->ready.notify_all();
}

void Engine::Impl::fail_all(const std::string& message) {
    for (const auto* list : {&scheduler->running(), &scheduler->waiting()})
        for (const auto& seq : *list) finish(*seq, FinishReason::Error, message); // no snapshot
    scheduler->collect();
}

} // namespace ninfer
