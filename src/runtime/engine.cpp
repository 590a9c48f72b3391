// Engine: loads the model, plans memory, builds the pools and the scheduler, and serves the
// public API. The step loop is in engine_step.cpp.
#include "ninfer/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "ops/memory.h"
#include "runtime/engine_impl.h"
#include "runtime/placement.h"
#include "runtime/route_selection.h"
#include "runtime/speculative/dflash_drafter.h"
#include "runtime/speculative/mtp_drafter.h"

namespace ninfer {

using runtime::Sequence;

namespace {

// The default context when none is configured: long enough for real use, small enough that the
// default KV pool of a real model fits on the CPU.
constexpr int64_t kDefaultMaxContext = 32768;
constexpr int kMaxTopLogprobs = 20;
constexpr float kMaxLogitBias = 100.0f; // OpenAI's range
// Prefix-cache snapshots every this many prompt tokens by default: one GDN state copy (63 MB on
// the 35B, ~20 us at H200 bandwidth) per 512 prefilled tokens costs under 0.1% of the prefill.
constexpr int kDefaultSnapshotStride = 512;
// The step's row budget when max_batch_tokens is 0. CUDA: chunks of 512 prompt tokens (the
// snapshot stride stays 512) from up to 16 sequences beside the decode rows: measured serving the
// fp8 35B-A3B at 256 concurrent (H100, 1k/128): 15,390 / 20,381 / 19,888 / 21,020 total tok/s
// at chunk/budget 512/2048, 512/8192, 2048/8192 and 4096/16384 (the last with 7.4 s median
// TTFT). CPU: steps cost their rows, so a small budget keeps decode steps short.
constexpr int kCudaBatchTokens = 8192;
constexpr int kCpuBatchTokens = 2048;
// CUDA memory kept out of the plan for what is allocated after it: the decode graphs' and the
// sampler's [rows, vocab] F32 buffers at the largest bucket, and the graphs themselves.
constexpr int64_t kGraphReserveBytes = int64_t(512) << 20;

DType parse_dtype(const std::string& name, Device device) {
    if (name == "auto") return device.is_cpu() ? DType::F32 : DType::BF16;
    if (name == "f32" || name == "float32") return DType::F32;
    if (name == "bf16" || name == "bfloat16") {
        require(!device.is_cpu(), "dtype bf16: the CPU backend computes in f32");
        return DType::BF16;
    }
    fail_invalid("unknown dtype '", name, "' (expected auto, bf16 or f32)");
}

// Whether an fp8 checkpoint's projections stay fp8 (EngineOptions::fp8_weights).
bool fp8_resident(const EngineOptions& o, const ops::ExecContext& ctx) {
    if (o.fp8_weights == "auto") return !ctx.device.is_cpu() && ctx.dtype == DType::BF16;
    if (o.fp8_weights == "dequantize") return false;
    require(o.fp8_weights == "resident" || o.fp8_weights == "w8a8", "unknown fp8_weights '",
            o.fp8_weights, "' (expected auto, resident, dequantize or w8a8)");
    require(o.fp8_weights != "w8a8" || ctx.device.is_cpu(),
            "fp8_weights w8a8 is the CPU's emulation of CUDA's W8A8 routes (for quality "
            "checks); on CUDA the route table decides (--fp8-weights resident or auto)");
    require(ctx.device.is_cpu() || ctx.dtype == DType::BF16,
            "fp8_weights resident: CUDA runs fp8 weights with bf16 activations (--dtype bf16)");
    return true;
}

// Whether a groupwise checkpoint's projections stay groupwise (EngineOptions::group_weights).
bool grouped_resident(const EngineOptions& o, const ops::ExecContext& ctx) {
    if (o.group_weights == "auto") return !ctx.device.is_cpu() && ctx.dtype == DType::BF16;
    if (o.group_weights == "dequantize") return false;
    require(o.group_weights == "resident", "unknown group_weights '", o.group_weights,
            "' (expected auto, resident or dequantize)");
    require(ctx.device.is_cpu() || ctx.dtype == DType::BF16,
            "group_weights resident: CUDA runs groupwise weights with bf16 activations "
            "(--dtype bf16)");
    return true;
}

// The DFlash drafter of --spec dflash|dflash2: --draft-model, else <model_dir>/<method>.
std::unique_ptr<model::DFlashModel> load_drafter(const EngineOptions& o,
                                                 const model::Qwen35Model& target,
                                                 const ops::ExecContext& ctx) {
    std::filesystem::path dir = o.draft_model;
    if (dir.empty() && !o.model_dir.empty() &&
        std::filesystem::exists(std::filesystem::path(o.model_dir) / o.speculative / "config.json"))
        dir = std::filesystem::path(o.model_dir) / o.speculative;
    require(!dir.empty(), "--spec ", o.speculative, " needs --draft-model DIR (a ", o.speculative,
            " drafter: config.json and safetensors)");
    std::unique_ptr<model::DFlashModel> d;
    // A mask token given by text is looked up in the target's tokenizer.json.
    const model::TokenLookup find_token = [&](const std::string& text) {
        return o.model_dir.empty() ? std::nullopt : io::find_token_id(o.model_dir, text);
    };
    if (o.random_weights) {
        const std::filesystem::path cfg =
            std::filesystem::is_directory(dir) ? dir / "config.json" : dir;
        d = model::DFlashModel::random(model::load_dflash_config(cfg), target.config(), ctx,
                                       o.random_seed + 1, find_token);
    } else {
        d = model::DFlashModel::load(dir, target.config(), ctx, find_token);
    }
    const bool v2 = o.speculative == "dflash2";
    require(d->config().v2 == v2, "--spec ", o.speculative, ": ", dir.string(), " holds a ",
            d->config().v2 ? "dflash2" : "dflash", " drafter");
    return d;
}

// --devices: the post-attention blocks of contiguous runs of layers on each device after the
// first (runtime/placement.h's split), each with a stream of its own (kept in streams).
model::MlpPlacement mlp_placement(const std::vector<Device>& devices, const io::ModelConfig& c,
                                  const ops::ExecContext& ctx,
                                  std::vector<std::shared_ptr<void>>& streams) {
    model::MlpPlacement p;
    if (devices.empty()) return p;
    for (size_t d = 1; d < devices.size(); ++d) {
        ops::enable_peer_access(ctx.device, devices[d]);
        ops::ExecContext on = ctx;
        on.device = devices[d];
        streams.push_back(ops::create_stream(on.device));
        on.stream = streams.back().get();
        p.devices.push_back(on);
    }
    p.layer_device = runtime::split_layer_devices(c.num_layers, int(devices.size()) - 1);
    ops::bind_device(ctx); // create_stream made the other devices current
    return p;
}

std::unique_ptr<model::Qwen35Model> load_model(const EngineOptions& o,
                                               const ops::ExecContext& ctx,
                                               const std::vector<Device>& devices,
                                               std::vector<std::shared_ptr<void>>& streams,
                                               const runtime::TensorRanks& tp) {
    const model::Residency resident(fp8_resident(o, ctx), grouped_resident(o, ctx));
    if (o.random_weights) {
        require(!o.config_file.empty() || !o.model_dir.empty(),
                "random weights need a config file or a model directory");
        const io::ModelConfig c =
            io::load_hf_config(o.config_file.empty() ? o.model_dir : o.config_file);
        if (tp.size() > 1)
            return model::Qwen35Model::random_parallel(c, tp.contexts, tp.collectives,
                                                       o.random_seed, resident,
                                                       {o.expert_parallel});
        return model::Qwen35Model::random(c, ctx, o.random_seed, resident,
                                          mlp_placement(devices, c, ctx, streams));
    }
    require(!o.model_dir.empty(), "no model directory given");
    if (tp.size() > 1)
        return model::Qwen35Model::load_parallel(o.model_dir, tp.contexts, tp.collectives,
                                                 resident, o.on_load_progress,
                                                 {o.expert_parallel});
    const model::MlpPlacement placement =
        devices.empty() ? model::MlpPlacement{}
                        : mlp_placement(devices, io::load_hf_config(o.model_dir), ctx, streams);
    return model::Qwen35Model::load(o.model_dir, ctx, resident, o.on_load_progress, placement);
}

void validate_options(const EngineOptions& o) {
    require(o.prefill_chunk >= 1, "prefill_chunk must be >= 1");
    require(o.max_batch_tokens >= 0, "max_batch_tokens must be >= 0 (0: from the device)");
    require(o.max_sequences >= 0, "max_sequences must be >= 0 (0: from memory)");
    require(o.kv_block_size >= 1, "kv_block_size must be >= 1");
    require(o.kv_cache_tokens >= 0, "kv_cache_tokens must be >= 0 (0: from memory)");
    require(std::isfinite(o.gpu_memory_utilization) && o.gpu_memory_utilization > 0 &&
                o.gpu_memory_utilization <= 1,
            "gpu_memory_utilization must be in (0, 1]");
    require(o.snapshot_stride >= 0, "snapshot_stride must be >= 0");
    require(o.decode_snapshot_stride >= 0, "decode_snapshot_stride must be >= 0");
    require(o.prefix_cache_snapshots >= 0, "prefix_cache_snapshots must be >= 0");
    require(std::isfinite(o.prefix_cache_host_gb) && o.prefix_cache_host_gb >= 0,
            "prefix_cache_host_gb must be >= 0");
    require(o.speculative.empty() || o.speculative == "mtp" || o.speculative == "dflash" ||
                o.speculative == "dflash2",
            "unknown speculative method '", o.speculative, "' (expected mtp, dflash or dflash2)");
    const int max_k = o.speculative == "mtp" ? kMaxMtpDraftTokens : kMaxDraftTokens;
    require(o.draft_tokens >= 0 && o.draft_tokens <= max_k, "--draft-tokens must be in [1, ",
            max_k, "] or auto");
    require(o.draft_model.empty() || o.speculative == "dflash" || o.speculative == "dflash2",
            "--draft-model needs --spec dflash or dflash2");
    require(o.draft_shortlist.empty() || !o.speculative.empty(),
            "--draft-shortlist needs --spec mtp, dflash or dflash2");
    require(o.draft_tokens == 0 || !o.speculative.empty(),
            "--draft-tokens needs a speculative method (--spec mtp)");
    require(o.tensor_parallel >= 1, "tensor_parallel must be >= 1");
    require(!o.expert_parallel || o.tensor_parallel >= 2,
            "--expert-parallel splits the experts over the ranks of --tensor-parallel N (N >= 2)");
}

// Verification groups: sequences that may verify drafts in one step. Each holds draft-tokens
// GDN state rows (64 MB each on the 35B); at larger batches speculation rarely pays, and
// the others decode plainly.
constexpr int32_t kVerifyGroups = 8;

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

Engine::Impl::Impl(const EngineOptions& o) : options(o) {
    validate_options(o);
    kv_dtype = ops::parse_kv_dtype(o.kv_dtype);
    gdn_state_dtype = runtime::parse_gdn_state_dtype(o.gdn_state_dtype);
    ctx.device = runtime::parse_device(o.device);
    std::vector<Device> devices; // --devices: the split, or the tensor-parallel ranks
    if (!o.devices.empty()) {
        devices = runtime::parse_device_list(o.devices);
        require(o.device == "cpu" || ctx.device == devices.front(), "--device ", o.device,
                " and --devices ", o.devices, " name different first devices");
        ctx.device = devices.front();
    }
    ctx.dtype = parse_dtype(o.dtype, ctx.device);
    if (options.max_batch_tokens == 0)
        options.max_batch_tokens = ctx.device.is_cpu() ? kCpuBatchTokens : kCudaBatchTokens;
    ctx.cpu_mode = o.cpu_reference ? ops::CpuMode::Reference : ops::CpuMode::Fast;
    ctx.cpu_w8a8 = o.fp8_weights == "w8a8" && ctx.device.is_cpu();
    require(!o.cpu_reference || ctx.device.is_cpu(), "the reference ops run on the CPU only");
    ops::set_cpu_threads(o.threads);
    stream = ops::create_stream(ctx.device);
    ctx.stream = stream.get();
    ops::bind_device(ctx);
    const ops::RouteTable routes = runtime::select_route_table(o.route_table, ctx.device);
    ops::set_active_route_table(routes);
    info.route_table = routes.source();
    if (o.tensor_parallel > 1) {
        ranks = runtime::make_tensor_ranks(ctx, o.tensor_parallel, devices, o.collective);
        devices.clear(); // the ranks', not a split
        info.collective = ranks.collectives[0]->backend();
    }
    info.tensor_parallel = o.tensor_parallel;
    info.expert_parallel = o.expert_parallel;
    model = load_model(o, ctx, devices, placed_streams, ranks);
    const io::ModelConfig& c = model->config();
    info.model_type = c.model_type;
    info.vision = model->has_vision();
    info.image_token_id = c.image_token_id;
    info.video_token_id = c.video_token_id;
    info.vision_start_token_id = c.vision_start_token_id;
    info.vision_end_token_id = c.vision_end_token_id;
    info.spatial_merge = int32_t(c.vision.spatial_merge_size);
    info.patch_size = int32_t(c.vision.patch_size);
    info.temporal_patch = int32_t(c.vision.temporal_patch_size);
    info.vocab_size = c.vocab_size;
    const bool has_dir = !o.model_dir.empty();
    info.token_limit = has_dir ? io::read_token_limit(o.model_dir, c.vocab_size) : c.vocab_size;
    if (has_dir) info.eos_token_ids = io::read_generation_eos(o.model_dir);
    if (info.eos_token_ids.empty()) info.eos_token_ids = c.eos_token_ids;
    // position_limit: max_position_embeddings, or YaRN's stretched context.
    require(o.max_context <= c.position_limit, "--max-context ", o.max_context,
            " exceeds the model's max_position_embeddings ", c.max_position_embeddings,
            c.position_limit > c.max_position_embeddings
                ? concat(" (", c.position_limit, " with its rope scaling)")
                : std::string());
    info.max_context =
        o.max_context > 0 ? o.max_context : std::min(c.position_limit, kDefaultMaxContext);
    model->set_context_limit(info.max_context);
    const bool speculate = !o.speculative.empty();
    if (speculate) {
        int auto_max = kAutoMaxDraftTokens;
        proposal_head = std::make_unique<runtime::ProposalHead>(
            ctx, *model,
            runtime::parse_shortlist(o.draft_shortlist, model->config().vocab_size));
        if (o.speculative == "mtp") {
            require(model->has_mtp(), "--spec mtp: this checkpoint has no MTP weights (mtp.*)");
            // The chain feeds each draft to the next MTP step on the device: ids must be global.
            require(!proposal_head->maps_ids(), "--draft-shortlist with --spec mtp takes a "
                    "count N (ids [0, N)) or a list of exactly those ids in order: the MTP chain "
                    "feeds each draft's id to its next step on the device");
        } else {
            draft_model = load_drafter(o, *model, ctx);
            auto_max = int(std::min<int64_t>(kAutoMaxDFlashTokens,
                                             draft_model->config().block_size - 1));
        }
        policy = std::make_unique<runtime::DraftPolicy>(
            o.draft_tokens, o.draft_tokens > 0 ? o.draft_tokens : auto_max);
    }
    plan_memory();
    const model::CacheSpec spec = cache_spec();
    const int64_t row_bytes = runtime::StatePool::bytes_per_row(spec, ctx.dtype);
    const ops::DeviceMemory host = ops::device_memory(ops::ExecContext::cpu());
    if (o.prefix_cache_host_gb * double(1 << 30) > double(host.total))
        fail(ErrorCategory::OutOfMemory, "--prefix-cache-host-gb ", o.prefix_cache_host_gb,
             " exceeds this machine's memory (", double(host.total) / double(1 << 30),
             " GiB): lower it");
    // A host snapshot holds a state row of every tensor-parallel rank.
    const int64_t snapshot_bytes = row_bytes * o.tensor_parallel;
    const int32_t host_buffers =
        o.prefix_cache && row_bytes > 0
            ? int32_t(std::min<double>(
                  o.prefix_cache_host_gb * double(1 << 30) / double(snapshot_bytes), 1 << 20))
            : 0;
    cache = std::make_unique<runtime::CacheStore>(ctx, spec, memory, host_buffers, ranks.peers());
    blocks = std::make_unique<runtime::BlockManager>(memory.kv_blocks, o.kv_block_size);
    if (o.prefix_cache)
        snapshots = std::make_unique<runtime::SnapshotCache>(*blocks, cache->snapshot_rows(),
                                                             host_buffers);
    runtime::SchedulerConfig sc;
    sc.max_sequences = memory.sequences;
    sc.max_batch_tokens = options.max_batch_tokens;
    sc.prefill_chunk = o.prefill_chunk;
    // Chunks end on stride boundaries: by default the stride never cuts a prefill chunk.
    const int64_t stride = o.snapshot_stride > 0
                               ? o.snapshot_stride
                               : std::max<int64_t>(kDefaultSnapshotStride, o.prefill_chunk);
    sc.snapshot_stride = (stride + o.kv_block_size - 1) / o.kv_block_size * o.kv_block_size;
    sc.decode_snapshot_stride = o.decode_snapshot_stride;
    sc.max_context = info.max_context;
    // The graphs' bounds, shared by the decode and verification graphs and the draft chain's.
    const bool use_graphs = !ctx.device.is_cpu() && o.cuda_graphs;
    runtime::DecodeGraphs::Layout graph_layout;
    graph_layout.block_size = o.kv_block_size;
    graph_layout.max_blocks_per_seq = int32_t(blocks->blocks_for(info.max_context));
    graph_layout.max_context = int32_t(info.max_context);
    graph_layout.max_seqs = memory.sequences;
    graph_layout.padding_row = cache->padding_row();
    graph_layout.padding_block = cache->padding_block();
    if (policy) {
        sc.verify_groups = memory.verify_rows / policy->max_tokens();
        verify_rows = {cache->verify_row_base(), policy->max_tokens()};
        const runtime::DraftGraphs draft_graphs = runtime::DraftGraphs::from_env();
        if (draft_model) {
            auto dflash = std::make_unique<runtime::DFlashDrafter>(
                ctx, *model, *draft_model, *proposal_head, *cache, o.kv_block_size,
                info.token_limit);
            if (use_graphs && draft_graphs.dflash) dflash->enable_graphs(graph_layout);
            drafter = std::move(dflash);
        } else {
            auto mtp = std::make_unique<runtime::MtpDrafter>(
                ctx, *model, *cache, o.kv_block_size, info.token_limit, *proposal_head);
            if (use_graphs) mtp->enable_graphs(graph_layout, draft_graphs);
            drafter = std::move(mtp);
        }
    }
    scheduler = std::make_unique<runtime::Scheduler>(sc, *blocks, snapshots.get(), policy.get());
    sampler = std::make_unique<runtime::Sampler>(ctx);
    // Encoded media are kept (by content) for repeated images: a multi-turn conversation about
    // one screenshot encodes it once.
    constexpr int64_t kMediaCacheBytes = int64_t(256) << 20;
    media_cache = std::make_unique<runtime::MediaEncoderCache>(kMediaCacheBytes);
    verifier = std::make_unique<runtime::Verifier>(ctx, *sampler, info.token_limit);
    if (use_graphs) {
        graph_layout.feature_layers = drafter ? drafter->feature_layers() : std::vector<int32_t>();
        graph_layout.hidden_size =
            drafter ? c.hidden_size * std::max<int64_t>(1, graph_layout.feature_layers.size()) : 0;
        graph_layout.verify = verify_rows;
        graphs = std::make_unique<runtime::DecodeGraphs>(ctx, *model, graph_layout);
        warm_graphs(sc.verify_groups);
    }
    if (!ctx.device.is_cpu()) { // the calling thread goes back to the default stream
        ops::ExecContext unbound = ctx;
        unbound.stream = nullptr;
        ops::bind_device(unbound);
    }
    publish_stats();
    thread = std::thread([this] { loop(); });
}

// Captures the graphs of every batch bucket up to options.graph_warmup sequences and every
// width a step may run (1, and 1 + K for each K the draft policy may choose), so that neither a
// server's first requests at a batch size nor the policy's first steps at a K pay an eager
// warm-up and a capture (a few ms each, longer than a whole decode step of a small model).
// Every row is padding (its own state row and KV block), so no sequence's state is touched.
// The largest shapes come first, so buffers that grow with the rows (a drafter's) are sized once.
// verifying: at most this many sequences verify drafts in one step (the scheduler's verification
// groups), so wider graphs are captured for the buckets up to it only.
void Engine::Impl::warm_graphs(int32_t verifying) {
    const int32_t limit = options.graph_warmup < 0
                              ? memory.sequences
                              : std::min(options.graph_warmup, memory.sequences);
    // Every K in max..1, then decode's 1: auto may choose any K, and a fixed K's rounds shrink
    // near a request's end (max tokens, the context), each shorter round its own shape.
    std::vector<int32_t> widths;
    for (int k = policy ? policy->max_tokens() : 0; k >= 1; --k) widths.push_back(k + 1);
    widths.push_back(1);
    const model::CacheViews caches = cache->views();
    for (int32_t bucket = limit > 0 ? runtime::DecodeGraphs::bucket_for(limit) : 0; bucket >= 1;
         bucket /= 2)
        for (const int32_t w : widths) {
            if (w > 1 && bucket > runtime::DecodeGraphs::bucket_for(verifying)) continue;
            // Each graph class checks its own bounds: a drafter may replay its proposal where
            // the verification forward is too wide for a graph (DFlash's (n, K) graphs).
            graphs->warm(bucket, w, caches);
            if (drafter) drafter->warm_graphs(bucket, w);
        }
}

model::CacheSpec Engine::Impl::cache_spec() const {
    model::CacheSpec spec = model->cache_spec(policy != nullptr && !draft_model);
    spec.recurrent_dtype = gdn_state_dtype;
    if (draft_model) {
        const model::DFlashConfig& d = draft_model->config();
        spec.draft_layers = d.num_layers;
        spec.draft_kv_heads = d.num_kv_heads;
        spec.draft_head_dim = d.head_dim;
    }
    return spec;
}

// Sizes the pools. On CUDA the budget is the device's memory times gpu_memory_utilization, less
// what is in use once the weights are loaded and a profile forward of the largest step has
// allocated its workspace.
void Engine::Impl::plan_memory() {
    const model::CacheSpec spec = cache_spec();
    runtime::MemoryPlanInput in;
    in.kv_bytes_per_token = runtime::KvPool::bytes_per_token(spec, ctx.dtype, kv_dtype);
    in.state_bytes_per_row = runtime::StatePool::bytes_per_row(spec, ctx.dtype);
    in.max_context = info.max_context;
    in.block_size = options.kv_block_size;
    in.sequences = options.max_sequences;
    in.kv_tokens = options.kv_cache_tokens;
    in.snapshots = options.prefix_cache_snapshots;
    in.prefix_cache = options.prefix_cache;
    if (policy) in.verify_rows = kVerifyGroups * policy->max_tokens();
    if (!ctx.device.is_cpu()) {
        step_scratch_bytes = profile_workspace();
        const ops::DeviceMemory m = ops::device_memory(ctx);
        const int64_t allowed = int64_t(double(m.total) * options.gpu_memory_utilization);
        // The step's scratch is freed after each forward, so `free` counts it as free: reserve
        // it (a 65,536-row step of the 35B takes ~9 GiB of MoE scratch).
        const int64_t in_use = m.total - m.free + step_scratch_bytes;
        // Tensor-parallel ranks on this device (a test layout) each hold pools of these shapes.
        in.budget_bytes =
            (allowed - in_use - kGraphReserveBytes) / std::max(1, ranks.on_first_device());
        if (in.budget_bytes <= 0)
            fail(ErrorCategory::OutOfMemory, "cuda:", ctx.device.index, ": ",
                 double(in_use) / double(1 << 30), " GiB are in use after loading the model, ",
                 "and --gpu-memory-utilization ", options.gpu_memory_utilization, " allows ",
                 double(allowed) / double(1 << 30),
                 " GiB: nothing is left for the KV cache; raise --gpu-memory-utilization or "
                 "lower --max-batch-tokens");
    }
    memory = runtime::plan_memory(in);
    memory.kv_dtype = kv_dtype;
}

// One forward of the largest step the scheduler can plan (max_batch_tokens rows in chunks of
// prefill_chunk) over throwaway pools, so the workspace is allocated before memory is planned.
// Returns what the step takes at its peak and gives back afterwards (its buffers and the ops'
// temporaries, which every step of that size takes again; 0 on the CPU).
int64_t Engine::Impl::profile_workspace() {
    const int64_t total = options.max_batch_tokens, chunk = options.prefill_chunk;
    const int64_t seqs = std::min<int64_t>((total + chunk - 1) / chunk, 256);
    runtime::MemoryPlan tmp;
    tmp.block_size = options.kv_block_size;
    tmp.kv_dtype = kv_dtype;
    tmp.sequences = int32_t(seqs);
    tmp.kv_blocks = seqs * ((chunk + tmp.block_size - 1) / tmp.block_size);
    runtime::CacheStore store(ctx, cache_spec(), tmp, 0, ranks.peers());
    std::vector<std::unique_ptr<Sequence>> owned;
    runtime::StepPlan step;
    int64_t left = total;
    int32_t next_block = 0;
    for (int64_t s = 0; s < seqs && left > 0; ++s) {
        auto seq = std::make_unique<Sequence>();
        const int64_t rows = std::min(left, chunk);
        seq->tokens.assign(size_t(rows), 0);
        seq->slot = int32_t(s);
        for (int64_t b = 0; b < (rows + tmp.block_size - 1) / tmp.block_size; ++b)
            seq->blocks.push_back(next_block++);
        store.run({{runtime::CacheOp::Kind::ZeroSlot, -1, seq->slot}});
        step.entries.push_back({seq.get(), rows});
        step.logit_seqs.push_back(seq.get());
        left -= rows;
        owned.push_back(std::move(seq));
    }
    // The vision tower's largest call (GPU: its scratch is held before the KV cache is planned).
    if (model->has_vision() && !ctx.device.is_cpu())
        model->vision().reserve(ctx, runtime::kMaxMediaPatches);
    // The step's peak counts from here: the throwaway pools and the vision scratch are not its.
    // What the forward keeps (the model's scratch) is still in use after the block; what it gave
    // back (the step buffers, the ops' temporaries) is the peak's excess over that.
    ops::reset_memory_peak(ctx);
    {
        runtime::StepBuffers scratch;
        model::ForwardBatch batch =
            runtime::build_forward_batch(ctx, step, options.kv_block_size, scratch);
        TensorView logits = scratch.logits_view(ctx, step.logit_seqs.size(), info.vocab_size);
        const int64_t T = batch.tokens.size(0), H = model->config().hidden_size;
        if (draft_model) { // the drafter's feature taps and their context write
            batch.feature_layers = draft_model->config().target_layers;
            batch.features =
                runtime::hidden_view(ctx, scratch, T, H * int64_t(batch.feature_layers.size()));
        } else if (policy) {
            batch.hidden_out = runtime::hidden_view(ctx, scratch, T, H);
        }
        model->forward(ctx, batch, store.views(), logits);
        if (draft_model)
            draft_model->write_context(ctx, batch.features, batch.positions, batch.seqs,
                                       store.views());
        if (policy && !draft_model) { // the MTP's alignment forward over the same rows
            Tensor out = Tensor::empty(ops::device_allocator(ctx.device), ctx.dtype, {T, H});
            batch.logit_rows = batch.logit_rows.narrow(0, 0, 0);
            model->mtp_forward(ctx, batch, batch.hidden_out, store.views(), out.view(),
                               TensorView());
        }
    }
    return std::max<int64_t>(0, ops::memory_peak(ctx) - ops::memory_in_use(ctx));
}

Engine::Impl::~Impl() {
    {
        std::lock_guard lock(mutex);
        stopping = true;
    }
    wake.notify_all();
    if (thread.joinable()) thread.join();
    // The diagnostic that NINFER_STEP_PROFILE asked for (nothing otherwise).
    if (const std::string r = profile.report(); !r.empty()) std::fputs(r.c_str(), stderr);
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() = default;

const ModelInfo& Engine::model_info() const {
    return impl_->info;
}

EngineStats Engine::stats() const {
    std::lock_guard lock(impl_->stats_mutex);
    return impl_->published;
}

MemoryStats Engine::memory_stats() const {
    return {impl_->model->weight_bytes(), impl_->cache->kv().bytes(),
            impl_->cache->states().bytes(), impl_->model->scratch_bytes()};
}

// Raises InvalidArgument without side effects.
void Engine::Impl::validate(const GenerationRequest& request) const {
    const auto require_token = [&](int32_t id, const char* what) {
        require(id >= 0 && id < info.token_limit, what, " ", id, " outside [0, ", info.token_limit,
                ")");
    };
    require(!request.prompt.empty(), "the prompt must hold at least one token");
    for (int32_t id : request.prompt) require_token(id, "prompt token id");
    require(int64_t(request.prompt.size()) < info.max_context, "prompt of ", request.prompt.size(),
            " tokens does not fit the context of ", info.max_context);
    require(request.max_new_tokens >= 0, "max_new_tokens must be >= 0");
    require(request.min_new_tokens >= 0 && request.min_new_tokens <= request.max_new_tokens,
            "min_new_tokens must be in [0, max_new_tokens]");
    require(!request.prefill_only || (request.max_new_tokens == 0 && !request.prompt_logprobs),
            "a prefill_only request generates nothing: max_new_tokens 0, no prompt_logprobs");
    require(request.cache_boundary >= 0 &&
                size_t(request.cache_boundary) < std::max<size_t>(request.prompt.size(), 1),
            "cache_boundary must be in [0, prompt length)");
    require(request.top_logprobs >= 0 && request.top_logprobs <= kMaxTopLogprobs,
            "top_logprobs must be in [0, ", kMaxTopLogprobs, "]");
    validate_sampling(request.sampling);
    for (const auto& [id, bias] : request.sampling.logit_bias) {
        require_token(id, "logit_bias token id");
        require(std::isfinite(bias) && std::fabs(bias) <= kMaxLogitBias,
                "logit_bias of token ", id, " must be in [-100, 100]");
    }
    for (int32_t id : request.sampling.allowed_token_ids) require_token(id, "allowed_token_ids id");
    runtime::validate_media(request, model->config(), model->has_vision());
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
    seq->media = runtime::layout_media(seq->request, model->config());
    if (seq->media) seq->key_tokens = runtime::media_cache_tokens(seq->tokens, *seq->media);
    out = RequestStream(seq->stream);
    if (seq->request.max_new_tokens == 0 && !seq->request.prefill_only &&
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
        for (auto& seq : queued) impl_->incoming.push_back(std::move(seq));
    }
    {
        std::lock_guard lock(impl_->stats_mutex);
        impl_->published.waiting += int64_t(queued.size());
    }
    impl_->wake.notify_all();
    return streams;
}

} // namespace ninfer
