// Engine::Impl: what the engine thread owns. engine.cpp builds it (model, memory plan, pools,
// scheduler) and serves the public API; engine_step.cpp runs the step loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "model/dflash.h"
#include "model/qwen3_5.h"
#include "ninfer/engine.h"
#include "ops/exec_context.h"
#include "runtime/cache_store.h"
#include "runtime/decode_graphs.h"
#include "runtime/media.h"
#include "runtime/memory_plan.h"
#include "runtime/sampler.h"
#include "runtime/scheduler/scheduler.h"
#include "runtime/sequence.h"
#include "runtime/speculative/draft_policy.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/proposal_head.h"
#include "runtime/speculative/verifier.h"
#include "runtime/step_plan.h"
#include "runtime/step_profile.h"
#include "runtime/tensor_ranks.h"

namespace ninfer {

struct Engine::Impl {
    // Declared first so it is destroyed last: device memory is freed in order on this stream.
    std::shared_ptr<void> stream;
    // --devices: the streams of the devices after the first (their post-attention blocks run on
    // them), destroyed after the model.
    std::vector<std::shared_ptr<void>> placed_streams;
    EngineOptions options;
    ops::ExecContext ctx;
    // --tensor-parallel: every rank's context (rank 0: ctx), stream and collective; one rank
    // (empty) otherwise. Declared before the model, which runs on them.
    runtime::TensorRanks ranks;
    std::unique_ptr<model::Qwen35Model> model;
    ModelInfo info;
    runtime::MemoryPlan memory;
    int64_t step_scratch_bytes = 0; // the profile forward's peak (CUDA), reserved by the plan
    ops::KvDtype kv_dtype = ops::KvDtype::Activation; // options.kv_dtype
    DType gdn_state_dtype = DType::F32;               // options.gdn_state_dtype
    std::unique_ptr<runtime::CacheStore> cache;
    std::unique_ptr<runtime::BlockManager> blocks;
    std::unique_ptr<runtime::SnapshotCache> snapshots; // null: prefix cache off
    std::unique_ptr<runtime::Scheduler> scheduler;
    std::unique_ptr<runtime::Sampler> sampler;
    std::unique_ptr<runtime::DecodeGraphs> graphs; // CUDA only
    runtime::StepBuffers buffers;
    std::unique_ptr<runtime::MediaEncoderCache> media_cache; // the vision tower's outputs
    // Speculative decoding (null without --spec).
    std::unique_ptr<runtime::DraftPolicy> policy;
    std::unique_ptr<model::DFlashModel> draft_model; // --spec dflash|dflash2
    // Its proposal head (--draft-shortlist): made before the memory plan, so the gathered rows of
    // a shortlist are counted as memory in use.
    std::unique_ptr<runtime::ProposalHead> proposal_head;
    // Declared after what it refers to (the DFlash drafter keeps references to both), so it is
    // destroyed first.
    std::unique_ptr<runtime::Drafter> drafter;
    std::unique_ptr<runtime::Verifier> verifier;
    runtime::VerifyRows verify_rows;
    SpeculativeStats spec_totals;
    int64_t last_draft_tokens = 0;
    // Requests that ended during the step: finished once the step's state is committed.
    struct Ending {
        runtime::Sequence* seq;
        FinishReason reason;
        std::string error;
    };
    std::vector<Ending> endings;
    runtime::StepProfile profile; // NINFER_STEP_PROFILE=1: per-phase step times (engine thread)
    bool step_timing_valid = true; // false: the step's forward warmed up or captured a graph

    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::unique_ptr<runtime::Sequence>> incoming; // guarded by mutex
    bool stopping = false;                                   // guarded by mutex
    std::atomic<uint64_t> next_id{1};
    uint64_t next_arrival = 0; // engine thread only
    std::thread thread;

    mutable std::mutex stats_mutex;
    EngineStats published; // guarded by stats_mutex

    explicit Impl(const EngineOptions& o);
    ~Impl();
    // The pools' shapes: the target's, with the MTP layers' KV (--spec mtp) or the DFlash
    // drafter's context layers (--spec dflash|dflash2).
    model::CacheSpec cache_spec() const;
    void plan_memory();
    int64_t profile_workspace();
    void warm_graphs(int32_t verifying); // EngineOptions::graph_warmup
    void loop();
    void take_incoming();
    void validate(const GenerationRequest& request) const;
    std::unique_ptr<runtime::Sequence> make_sequence(GenerationRequest request,
                                                     RequestStream& out);
    void drop_cancelled();
    void step();
    void finish(runtime::Sequence& seq, FinishReason reason, const std::string& error = {});
    void end_after_step(runtime::Sequence& seq, FinishReason reason, const std::string& error = {});
    bool accept_token(runtime::Sequence& seq, const runtime::SampleOutput& out);
    void run_forward(runtime::StepPlan& plan, TensorView& logits, TensorView& hidden);
    runtime::CacheOps commit_verified(const runtime::StepPlan& plan) const;
    void setup_speculation();
    void score_prompts(const runtime::StepPlan& plan, const TensorView& rows);
    void fail_all(const std::string& message);
    bool constrain(runtime::Sequence& seq);
    void publish_stats();
    bool has_work() const;
};

} // namespace ninfer
