// Engine: loads the model, owns the pools and runs the step loop on its own thread.
#include "ninfer/engine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <thread>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "model/qwen3_5.h"
#include "ops/logits.h"
#include "ops/memory.h"
#include "runtime/decode_graphs.h"
#include "runtime/kv_pool.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "runtime/state_pool.h"
#include "runtime/step_plan.h"

namespace ninfer {

using runtime::Sequence;

namespace {

// The default context when none is configured: long enough for real use, small enough that the
// default KV pool of a real model fits on the CPU.
constexpr int64_t kDefaultMaxContext = 32768;
constexpr int kMaxTopLogprobs = 20;

Device parse_device(const std::string& name) {
    if (name == "cpu") return Device::cpu();
    if (name == "cuda") return Device::cuda(0);
    if (name.rfind("cuda:", 0) == 0) {
        const std::string index = name.substr(5);
        require(!index.empty() && index.size() < 4 &&
                    index.find_first_not_of("0123456789") == std::string::npos,
                "device '", name, "': expected cuda:N");
        return Device::cuda(std::stoi(index));
    }
    fail_invalid("unknown device '", name, "' (expected cpu, cuda or cuda:N)");
}

DType parse_dtype(const std::string& name, Device device) {
    if (name == "auto") return device.is_cpu() ? DType::F32 : DType::BF16;
    if (name == "f32" || name == "float32") return DType::F32;
    if (name == "bf16" || name == "bfloat16") {
        require(!device.is_cpu(), "dtype bf16: the CPU backend computes in f32");
        return DType::BF16;
    }
    fail_invalid("unknown dtype '", name, "' (expected auto, bf16 or f32)");
}

std::unique_ptr<model::Qwen35Model> load_model(const EngineOptions& o,
                                               const ops::ExecContext& ctx) {
    if (o.random_weights) {
        require(!o.config_file.empty() || !o.model_dir.empty(),
                "random weights need a config file or a model directory");
        const io::ModelConfig c =
            io::load_hf_config(o.config_file.empty() ? o.model_dir : o.config_file);
        return model::Qwen35Model::random(c, ctx, o.random_seed);
    }
    require(!o.model_dir.empty(), "no model directory given");
    return model::Qwen35Model::load(o.model_dir, ctx);
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

void validate_sampling(const SamplingOptions& s) {
    require(std::isfinite(s.temperature) && s.temperature >= 0, "temperature must be >= 0");
    require(s.top_k >= 0, "top_k must be >= 0");
    require(std::isfinite(s.top_p) && s.top_p > 0 && s.top_p <= 1, "top_p must be in (0, 1]");
    require(std::isfinite(s.min_p) && s.min_p >= 0 && s.min_p <= 1, "min_p must be in [0, 1]");
    require(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0,
            "repetition_penalty must be > 0");
    require(std::isfinite(s.presence_penalty) && std::fabs(s.presence_penalty) <= 2,
            "presence_penalty must be in [-2, 2]");
    require(std::isfinite(s.frequency_penalty) && std::fabs(s.frequency_penalty) <= 2,
            "frequency_penalty must be in [-2, 2]");
}

} // namespace

struct Engine::Impl {
    // Declared first so it is destroyed last: device memory is freed in order on this stream.
    std::shared_ptr<void> stream;
    EngineOptions options;
    ops::ExecContext ctx;
    std::unique_ptr<model::Qwen35Model> model;
    ModelInfo info;
    std::unique_ptr<runtime::KvPool> kv;
    std::unique_ptr<runtime::StatePool> states;
    std::unique_ptr<runtime::Sampler> sampler;
    std::unique_ptr<runtime::DecodeGraphs> graphs; // CUDA only
    runtime::StepBuffers buffers;

    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::unique_ptr<Sequence>> waiting; // guarded by mutex
    bool stopping = false;                         // guarded by mutex
    std::vector<std::unique_ptr<Sequence>> active; // engine thread only
    std::atomic<uint64_t> next_id{1};
    std::atomic<int64_t> n_waiting{0}, n_active{0}, kv_used{0}, slots_used{0}; // for stats()
    std::thread thread;

    explicit Impl(const EngineOptions& o);
    ~Impl();
    void loop();
    void admit();
    void validate(const GenerationRequest& request) const;
    std::unique_ptr<Sequence> make_sequence(GenerationRequest request, RequestStream& out);
    void drop_cancelled();
    void step();
    void finish(Sequence& seq, FinishReason reason, const std::string& error = {});
    void accept_token(Sequence& seq, const runtime::SampleOutput& out);
    void score_prompts(const runtime::StepPlan& plan, const TensorView& rows);
    void fail_active(const std::string& message);
    bool constrain(Sequence& seq);
    void publish_stats();
};

Engine::Impl::Impl(const EngineOptions& o) : options(o) {
    require(o.prefill_chunk >= 1, "prefill_chunk must be >= 1");
    require(o.max_batch_tokens >= 1, "max_batch_tokens must be >= 1");
    require(o.max_sequences >= 1, "max_sequences must be >= 1");
    require(o.kv_block_size >= 1, "kv_block_size must be >= 1");
    ctx.device = parse_device(o.device);
    ctx.dtype = parse_dtype(o.dtype, ctx.device);
    ctx.cpu_mode = o.cpu_reference ? ops::CpuMode::Reference : ops::CpuMode::Fast;
    require(!o.cpu_reference || ctx.device.is_cpu(), "the reference ops run on the CPU only");
    ops::set_cpu_threads(o.threads);
    stream = ops::create_stream(ctx.device);
    ctx.stream = stream.get();
    ops::bind_device(ctx);
    model = load_model(o, ctx);
    const io::ModelConfig& c = model->config();
    info.model_type = c.model_type;
    info.vocab_size = c.vocab_size;
    const bool has_dir = !o.model_dir.empty();
    info.token_limit = has_dir ? io::read_token_limit(o.model_dir, c.vocab_size) : c.vocab_size;
    if (has_dir) info.eos_token_ids = io::read_generation_eos(o.model_dir);
    if (info.eos_token_ids.empty()) info.eos_token_ids = c.eos_token_ids;
    require(o.max_context <= c.max_position_embeddings, "max_context ", o.max_context,
            " exceeds the model's max_position_embeddings ", c.max_position_embeddings);
    info.max_context =
        o.max_context > 0 ? o.max_context : std::min(c.max_position_embeddings, kDefaultMaxContext);
    const int64_t kv_tokens =
        o.kv_cache_tokens > 0 ? o.kv_cache_tokens : int64_t(o.max_sequences) * info.max_context;
    const int64_t blocks = (kv_tokens + o.kv_block_size - 1) / o.kv_block_size;
    const DType dt = ctx.dtype;
    kv = std::make_unique<runtime::KvPool>(model->cache_spec(), blocks, o.kv_block_size, ctx.device,
                                           dt);
    states =
        std::make_unique<runtime::StatePool>(model->cache_spec(), o.max_sequences, ctx.device, dt);
    sampler = std::make_unique<runtime::Sampler>(ctx);
    if (!ctx.device.is_cpu() && o.cuda_graphs)
        graphs = std::make_unique<runtime::DecodeGraphs>(ctx, *model, o.kv_block_size,
                                                         int32_t(kv->blocks_for(info.max_context)),
                                                         int32_t(info.max_context));
    if (!ctx.device.is_cpu()) { // the calling thread goes back to the default stream
        ops::ExecContext unbound = ctx;
        unbound.stream = nullptr;
        ops::bind_device(unbound);
    }
    thread = std::thread([this] { loop(); });
}

Engine::Impl::~Impl() {
    {
        std::lock_guard lock(mutex);
        stopping = true;
    }
    wake.notify_all();
    if (thread.joinable()) thread.join();
}

void Engine::Impl::loop() {
    ops::bind_device(ctx);
    ops::set_cpu_threads(options.threads); // OpenMP thread counts are per calling thread
    for (;;) {
        {
            std::unique_lock lock(mutex);
            wake.wait(lock, [&] { return stopping || !waiting.empty() || !active.empty(); });
            if (stopping) break;
        }
        try {
            admit();
            drop_cancelled();
            if (!active.empty()) step();
        } catch (const std::exception& e) {
            fail_active(e.what());
        }
        publish_stats();
    }
    std::lock_guard lock(mutex);
    for (auto& seq : active) finish(*seq, FinishReason::Cancelled);
    for (auto& seq : waiting) finish(*seq, FinishReason::Cancelled);
    active.clear();
    waiting.clear();
}

void Engine::Impl::admit() {
    std::lock_guard lock(mutex);
    while (!waiting.empty()) {
        Sequence& seq = *waiting.front();
        if (seq.stream->cancel_requested) {
            finish(seq, FinishReason::Cancelled);
            waiting.pop_front();
            continue;
        }
        const int64_t need = kv->blocks_for(
            std::min<int64_t>(seq.prompt_length() + seq.request.max_new_tokens, info.max_context));
        if (states->free_slots() == 0 || kv->free_blocks() < need) break; // first come first served
        seq.slot = states->acquire(ctx);
        seq.blocks = kv->allocate(need);
        active.push_back(std::move(waiting.front()));
        waiting.pop_front();
    }
}

void Engine::Impl::publish_stats() {
    {
        std::lock_guard lock(mutex);
        n_waiting = int64_t(waiting.size());
    }
    n_active = int64_t(active.size());
    kv_used = kv->num_blocks() - kv->free_blocks();
    slots_used = options.max_sequences - states->free_slots();
}

// Fills seq.allowed from its request's constraint; false (the request ended) when the
// constraint failed or allows nothing.
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
    finish(seq, FinishReason::Error, error);
    return false;
}

void Engine::Impl::drop_cancelled() {
    for (auto& seq : active)
        if (seq->stream->cancel_requested) finish(*seq, FinishReason::Cancelled);
    std::erase_if(active, [](const auto& s) { return s->slot < 0; });
}

void Engine::Impl::step() {
    runtime::StepPlan plan =
        runtime::plan_step(active, options.prefill_chunk, options.max_batch_tokens);
    if (plan.entries.empty()) return;
    const auto now = Clock::now();
    for (const auto& e : plan.entries)
        if (!e.seq->has_scheduled) {
            e.seq->has_scheduled = true;
            e.seq->scheduled = now;
        }
    model::CacheViews caches{kv->k_views(), kv->v_views(), states->conv_views(),
                             states->recurrent_views()};
    TensorView logits;
    const int64_t sample_rows = int64_t(plan.logit_seqs.size());
    if (graphs && plan.scored.empty() && graphs->eligible(plan)) {
        logits = graphs->run(plan, caches);
    } else {
        model::ForwardBatch batch =
            runtime::build_forward_batch(ctx, plan, kv->block_size(), buffers);
        logits =
            buffers.logits_view(ctx, size_t(sample_rows + plan.scored_rows()), info.vocab_size);
        model->forward(ctx, batch, caches, logits);
    }
    if (!plan.scored.empty())
        score_prompts(plan, logits.narrow(0, sample_rows, plan.scored_rows()));
    for (const auto& e : plan.entries) e.seq->cached += e.rows;
    std::vector<runtime::SampleInput> inputs;
    std::vector<uint8_t> live; // rows whose constraint allows some token
    for (Sequence* seq : plan.logit_seqs) {
        const bool masked = seq->request.constraint != nullptr && seq->request.max_new_tokens > 0;
        live.push_back(!masked || constrain(*seq));
        inputs.push_back({&seq->request.sampling, seq->seed, int64_t(seq->tokens.size()),
                          seq->request.top_logprobs, &seq->prompt_set, &seq->output_counts,
                          masked && live.back() ? &seq->allowed : nullptr});
    }
    std::vector<runtime::SampleOutput> outs =
        sampler->sample(logits.narrow(0, 0, sample_rows), info.token_limit, inputs);
    for (size_t i = 0; i < outs.size(); ++i) {
        Sequence& seq = *plan.logit_seqs[i];
        if (seq.request.max_new_tokens == 0) // a prompt-scoring request: no token wanted
            finish(seq, FinishReason::Length);
        else if (live[i])
            accept_token(seq, outs[i]);
    }
    std::erase_if(active, [](const auto& s) { return s->slot < 0; });
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
            const int32_t id = seq.tokens[size_t(seq.cached + i + 1)];
            ops::download(ctx, rows.narrow(0, r, 1).narrow(1, id, 1).reshape({1}),
                          TensorView::contiguous(one.data(), DType::F32, Device::cpu(), {1}));
            scores.push_back({id, one[0] - lse_h[size_t(r)]});
        }
        {
            std::lock_guard lock(seq.stream->mutex);
            auto& pending = seq.stream->pending_prompt;
            pending.insert(pending.end(), scores.begin(), scores.end());
        }
        seq.stream->ready.notify_all();
    }
}

void Engine::Impl::accept_token(Sequence& seq, const runtime::SampleOutput& out) {
    if (out.non_finite) {
        finish(seq, FinishReason::Error,
               concat("non-finite logits at position ", seq.tokens.size(),
                      ": the request was stopped"));
        return;
    }
    const int32_t id = out.token.id;
    if (seq.request.constraint) {
        try {
            seq.request.constraint->accept(id);
        } catch (const std::exception& e) {
            finish(seq, FinishReason::Error, concat("token constraint failed: ", e.what()));
            return;
        }
    }
    seq.tokens.push_back(id);
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
    if (seq.stop_ids.count(id))
        finish(seq, FinishReason::Stop);
    else if (seq.generated >= seq.request.max_new_tokens ||
             int64_t(seq.tokens.size()) >= info.max_context)
        finish(seq, FinishReason::Length);
}

void Engine::Impl::finish(Sequence& seq, FinishReason reason, const std::string& error) {
    if (seq.slot >= 0) {
        states->release(seq.slot);
        kv->release(seq.blocks);
        seq.blocks.clear();
        seq.slot = -1;
    }
    const auto now = Clock::now();
    RequestTimings t;
    t.prompt_tokens = int(seq.prompt_length());
    t.generated_tokens = int(seq.generated);
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

void Engine::Impl::fail_active(const std::string& message) {
    for (auto& seq : active) finish(*seq, FinishReason::Error, message);
    active.clear();
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() = default;

const ModelInfo& Engine::model_info() const {
    return impl_->info;
}

EngineStats Engine::stats() const {
    EngineStats s;
    s.waiting = impl_->n_waiting;
    s.active = impl_->n_active;
    s.kv_blocks_used = impl_->kv_used;
    s.kv_blocks_total = impl_->kv->num_blocks();
    s.state_slots_used = impl_->slots_used;
    s.state_slots_total = impl_->options.max_sequences;
    return s;
}

MemoryStats Engine::memory_stats() const {
    return {impl_->model->weight_bytes(), impl_->kv->bytes(), impl_->states->bytes(),
            impl_->model->scratch_bytes()};
}

// Raises InvalidArgument (or OutOfMemory for a request no cache could hold) without side effects.
void Engine::Impl::validate(const GenerationRequest& request) const {
    require(!request.prompt.empty(), "the prompt must hold at least one token");
    for (int32_t id : request.prompt)
        require(id >= 0 && id < info.token_limit, "prompt token id ", id, " outside [0, ",
                info.token_limit, ")");
    require(int64_t(request.prompt.size()) < info.max_context, "prompt of ", request.prompt.size(),
            " tokens does not fit the context of ", info.max_context);
    require(request.max_new_tokens >= 0, "max_new_tokens must be >= 0");
    require(request.top_logprobs >= 0 && request.top_logprobs <= kMaxTopLogprobs,
            "top_logprobs must be in [0, ", kMaxTopLogprobs, "]");
    validate_sampling(request.sampling);
    const int64_t blocks_needed = kv->blocks_for(std::min<int64_t>(
        int64_t(request.prompt.size()) + request.max_new_tokens, info.max_context));
    if (blocks_needed > kv->num_blocks())
        fail(ErrorCategory::OutOfMemory, "the request needs ", blocks_needed,
             " KV blocks; the cache holds ", kv->num_blocks());
}

// A validated request as a sequence for the waiting queue, or nullptr when it is already
// finished (nothing to generate or score).
std::unique_ptr<Sequence> Engine::Impl::make_sequence(GenerationRequest request,
                                                      RequestStream& out) {
    auto seq = std::make_unique<Sequence>();
    seq->stream = std::make_shared<RequestStream::State>();
    seq->stream->id = next_id++;
    seq->seed = request.sampling.seed ? *request.sampling.seed : std::random_device{}();
    seq->stream->seed = seq->seed;
    seq->tokens = request.prompt;
    seq->submitted = Clock::now();
    if (!request.ignore_eos)
        seq->stop_ids.insert(info.eos_token_ids.begin(), info.eos_token_ids.end());
    seq->stop_ids.insert(request.stop_token_ids.begin(), request.stop_token_ids.end());
    if (runtime::needs_penalties(request.sampling))
        seq->prompt_set.insert(request.prompt.begin(), request.prompt.end());
    seq->request = std::move(request);
    out = RequestStream(seq->stream);
    if (seq->request.max_new_tokens == 0 &&
        !(seq->request.prompt_logprobs && seq->request.prompt.size() > 1)) {
        finish(*seq, FinishReason::Length);
        return nullptr;
    }
    return seq;
}

RequestStream Engine::submit(GenerationRequest request) {
    std::vector<GenerationRequest> one;
    one.push_back(std::move(request));
    return std::move(submit_all(std::move(one)).front());
}

std::vector<RequestStream> Engine::submit_all(std::vector<GenerationRequest> requests) {
    for (const GenerationRequest& r : requests) impl_->validate(r);
    std::vector<RequestStream> streams(requests.size());
    std::vector<std::unique_ptr<Sequence>> queued;
    for (size_t i = 0; i < requests.size(); ++i)
        if (auto seq = impl_->make_sequence(std::move(requests[i]), streams[i]))
            queued.push_back(std::move(seq));
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& seq : queued) impl_->waiting.push_back(std::move(seq));
        impl_->n_waiting = int64_t(impl_->waiting.size());
    }
    impl_->wake.notify_all();
    return streams;
}

} // namespace ninfer
