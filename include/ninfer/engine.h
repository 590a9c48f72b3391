// ninfer::Engine: the public API of the inference engine. Load a model, submit generation
// requests (token ids + sampling + stop policy), stream their tokens, cancel them.
//
// One engine thread owns the model, the KV and state pools and the device; it runs step after
// step over all active requests (prompt chunks and decode rows in one ragged batch). Submitting
// and reading are thread-safe and never block other requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/error.h"
#include "ninfer/token_constraint.h"

namespace ninfer {

struct EngineOptions {
    std::string model_dir;       // HF checkpoint directory (config.json + *.safetensors)
    std::string config_file;     // with random_weights: an HF config.json instead of a model
    bool random_weights = false; // deterministic random weights made on the device
    uint64_t random_seed = 0;
    std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
    // The seed's split over several devices, e.g. "cuda:0,cuda:1" (or "0,1"): every layer's
    // post-attention block (norm + MLP or MoE) lives and runs on the devices after the first, in
    // contiguous runs of layers; the first keeps everything else, all KV and GDN state, and gains
    // the memory the blocks free as KV. Empty: one device (`device`). A device may repeat
    // ("cuda:0,cuda:0": a second stream on one GPU, the single-GPU check of the path; "cpu,cpu"
    // on the CPU).
    std::string devices;
    // Tensor parallelism over N ranks (Megatron's layout: each rank holds 1/N of every layer's
    // heads and rows, two all-reduces a layer, the head split by vocabulary). The ranks' devices:
    // `devices` when given (N of them; a device may repeat, as above), else N devices from
    // `device` on (cuda:0..N-1; on the CPU, N CPU ranks). 1: off.
    int tensor_parallel = 1;
    // Expert parallelism (MoE models, with tensor_parallel N >= 2): each rank holds a run of
    // E / N routed experts whole instead of 1/N of every expert's rows. A rank runs the tokens'
    // pairs routed to its experts; the layer's all-reduce combines them.
    bool expert_parallel = false;
    // The ranks' collectives: "host" (staged through host memory: any devices, slow on CUDA),
    // "device" (CUDA: each rank's kernel reads the others' parts over P2P or one GPU, streams
    // ordered by events: TP steps then run as CUDA graphs), "nccl" (CUDA builds with NINFER_NCCL)
    // or "auto" (nccl where built and on CUDA, else host).
    std::string collective = "auto";
    std::string dtype = "auto";  // weights and activations: auto (CPU f32, CUDA bf16), bf16, f32
    bool cpu_reference = false;  // run the CPU reference ops (FP64 oracle; slow)
    // FP8 checkpoints (quantization_config fp8): "resident" keeps the block-wise fp8
    // projections as fp8 in memory (one byte a weight; CUDA with bf16 compute reads the codes,
    // the CPU dequantizes them in every op: a test mode), "dequantize" converts them to the
    // compute dtype at load, "auto" is resident on CUDA with bf16 and dequantize otherwise.
    // "w8a8" (CPU only): resident, and every fp8 projection quantizes its input rows to e4m3
    // per 128-column block first, the numerics of CUDA's W8A8 routes (for quality checks).
    std::string fp8_weights = "auto";
    bool cuda_graphs = true;     // replay decode steps as CUDA graphs (CUDA devices)
    // With cuda_graphs: the decode graphs (and the speculative verification, draft and
    // alignment graphs of every K the draft policy may choose) are captured at start-up for the
    // batch buckets 1, 2, 4, ... up to this many sequences, so no step pays a capture later.
    // -1: every bucket (up to the sequences the engine runs at once); 0: none (each graph is
    // captured at its shape's second step).
    int graph_warmup = -1;
    int threads = 0;             // CPU threads (0: the CPUs this process may use, one left free)
    int prefill_chunk = 512;     // most prompt tokens of one sequence in one step
    // Most rows (prompt + decode) in one step. 0: from the device, 8192 on CUDA (serving the fp8
    // 35B-A3B at 256 concurrent on an H100, 1k/128: 20,381 total tok/s against 15,390 at 2048,
    // inter-token p50 40 against 110 ms), 2048 on the CPU.
    int max_batch_tokens = 0;
    // Sequences resident at once (GDN state slots). 0: from memory (CUDA: what the KV and state
    // budget holds, up to 256; CPU: 16).
    int max_sequences = 0;
    int max_context = 0;         // longest sequence (0: min(max_position_embeddings, 32768))
    int kv_block_size = 16;      // tokens per KV block
    // KV cache storage: "bf16" (the activation dtype: bf16 on CUDA, f32 on the CPU), "int8"
    // (int8 codes, an f16 scale per 64 dims of each token and head) or "fp8" (e4m3 codes, an
    // f32 scale per token and head). int8 and fp8 about double the tokens that fit.
    std::string kv_dtype = "bf16";
    // GDN recurrent state storage: "f32" (the default: a request's tokens do not depend on how it
    // was batched, chunked or resumed from the prefix cache) or "bf16" (half the state bytes:
    // each decode step reads and writes 63 MB less per sequence on the 35B-A3B, and twice the
    // sequences and prefix snapshots fit; each step's store rounds the state, as vLLM's
    // --mamba-ssm-cache-dtype bfloat16). "float32" / "bfloat16" are accepted too.
    std::string gdn_state_dtype = "f32";
    // Groupwise w8/q4 checkpoints (ninfer convert --to w8|q4): "resident" (every quantized
    // projection, MoE experts included, stays as codes and scales: about a quarter (q4) or half
    // (w8) of the bf16 bytes; CUDA with bf16 compute, or the CPU, where each op dequantizes),
    // "dequantize" (at load, to the compute dtype) or "auto" (the default: resident on CUDA with
    // bf16 compute, else dequantize).
    std::string group_weights = "auto";
    // The kernel route table (which kernel each CUDA op takes by rows, per GPU): "auto" (the
    // default: the table `ninfer tune` wrote for this GPU under the cache directory, else the
    // built-in one), "builtin", or the path of a table file. It holds for the whole process.
    std::string route_table = "auto";
    // KV capacity in tokens. 0: from memory (CUDA: gpu_memory_utilization; CPU: max_sequences *
    // max_context).
    int64_t kv_cache_tokens = 0;
    // Share of the device's memory the engine may hold in all (weights, KV, state, snapshots,
    // workspace), as vLLM's --gpu-memory-utilization. CUDA only.
    double gpu_memory_utilization = 0.9;
    // Prefix cache: full KV blocks shared across requests by content, with GDN state snapshots
    // at the end of every prompt and generation and every snapshot_stride tokens.
    bool prefix_cache = true;
    int snapshot_stride = 0; // tokens, a multiple of kv_block_size (0: max(512, prefill_chunk))
    int prefix_cache_snapshots = 0; // device snapshot slots (0: from memory; CPU: 8 a slot)
    // Generated tokens between snapshots of a decoding sequence (0: none). A chat client sends
    // an answer back as text, and its tokenization can differ from the sampled ids (a model may
    // sample "_r" "iver" where the tokenizer makes "_" "river"); the next turn then resumes from
    // the last snapshot before the first such difference instead of the prompt's end. Not
    // with speculation (a drafter's context trails the commit).
    int decode_snapshot_stride = 0;
    double prefix_cache_host_gb = 0; // host memory for snapshots evicted from the device
    // Speculative decoding: "" (off), "mtp" (the checkpoint's MTP head drafts), "dflash" or
    // "dflash2" (a DFlash / DFlash2 block-diffusion drafter, draft_model); the model verifies:
    // greedy output is unchanged and sampling keeps its distribution.
    std::string speculative;
    // Draft tokens per round with speculation: 1..kMaxMtpDraftTokens (mtp) or
    // 1..kMaxDraftTokens (dflash), or 0 (auto: chosen every step from the measured acceptance
    // and step times, off when it would not pay).
    int draft_tokens = 0;
    // The DFlash drafter's directory (config.json + safetensors; with random_weights its
    // config.json alone, the weights random). Empty: <model_dir>/<speculative> when it exists
    // (the demo model ships its drafter there).
    std::string draft_model;
    // The DFlash proposal head: "" (the target's whole lm_head), "N" (the rows of ids [0, N))
    // or a JSON file with an array of ids (runtime/speculative/proposal_head.h). Only the
    // drafts change; the output does not.
    std::string draft_shortlist;
    // Progress of reading a checkpoint's weights (not random_weights): bytes_done of the
    // bytes_total its safetensors hold. Called on the thread that constructs the Engine, before
    // the constructor returns: once with 0 at the start, about every 64 MiB read, and once with
    // bytes_done == bytes_total at the end. Unset: no reports. A throw ends the construction.
    std::function<void(int64_t bytes_done, int64_t bytes_total)> on_load_progress;
};

inline constexpr int kMaxDraftTokens = 15;   // a DFlash block of 16
inline constexpr int kMaxMtpDraftTokens = 8;
inline constexpr int kAutoMaxDraftTokens = 6;     // MTP's auto range
inline constexpr int kAutoMaxDFlashTokens = 7;    // DFlash's (z-lab's recommended block of 8)

struct SamplingOptions {
    bool greedy = false; // argmax (also when temperature <= 0)
    float temperature = 1.0f;
    int top_k = 0;      // 0: off
    float top_p = 1.0f; // 1: off
    float min_p = 0.0f; // 0: off
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    float repetition_penalty = 1.0f; // 1: off
    std::optional<uint64_t> seed;    // unset: drawn at submit (reported in the result)
    // (token id, bias) pairs added to those tokens' logits before penalties, masks and sampling
    // (OpenAI's logit_bias: -100 bans a token, +100 all but forces it); ids below the model's
    // token limit, biases finite within [-100, 100]. Reported logprobs stay the raw model's.
    std::vector<std::pair<int32_t, float>> logit_bias;
    // When not empty, only these ids may be sampled (vLLM's allowed_token_ids); the stop ids
    // are not added.
    std::vector<int32_t> allowed_token_ids;
};

// TokenConstraint (a per-request restriction of the next token): ninfer/token_constraint.h.

// One image or video of a multimodal prompt (the model must carry a vision tower). The caller
// (the server, `ninfer run --image`) decodes and preprocesses it exactly as the checkpoint's HF
// processor does and expands its placeholders in the prompt.
struct MediaInput {
    // Pixel values [patches, C * temporal_patch * patch * patch] f32, patches = t * h * w, in
    // the processor's order (merge blocks in raster order, each block's patches in raster order).
    std::shared_ptr<const std::vector<float>> pixels;
    int32_t grid_t = 1, grid_h = 0, grid_w = 0; // in patches (an image has grid_t = 1)
    bool video = false;
    // Where each temporal group's placeholder run starts in the prompt (grid_t runs of
    // grid_h * grid_w / merge^2 image_pad or video_pad tokens each; a video's runs are separated
    // by their timestamps, an image has one run).
    std::vector<int32_t> offsets;
    // A hash of the decoded medium; 0: the engine hashes the pixels. Equal hashes share the
    // encoder cache and prefix-cache entries, so it must identify the pixels.
    uint64_t content_hash = 0;
};

struct GenerationRequest {
    std::vector<int32_t> prompt; // token ids, at least one
    SamplingOptions sampling;
    int max_new_tokens = 256;
    std::vector<int32_t> stop_token_ids;         // in addition to the model's EOS ids
    bool ignore_eos = false;                     // do not stop at the model's EOS ids
    // The stop ids (EOS unless ignore_eos, stop_token_ids) cannot be sampled before this many
    // tokens are generated (vLLM's min_tokens; at most max_new_tokens). Stop strings are the
    // text layer's.
    int min_new_tokens = 0;
    int top_logprobs = 0;                        // alternatives reported per token (0..20)
    std::shared_ptr<TokenConstraint> constraint; // optional
    // Score the prompt: report the log-probability of every prompt token after the first, given
    // the tokens before it (RequestUpdate::prompt_logprobs, before any generated token). Costs
    // a logits row per prompt token (a [prefill_chunk, vocab] F32 buffer). With
    // max_new_tokens == 0 the request only scores its prompt and ends with Length.
    bool prompt_logprobs = false;
    // Scheduling priority: lower runs first (as vLLM's `priority`); equal priorities run in
    // arrival order. Under memory pressure the lowest priority, newest request is preempted.
    int priority = 0;
    // A prompt position (1 .. prompt length - 1; 0: none) where a prefix-cache snapshot is
    // worth keeping because a later request is likely to diverge right after it: for a chat
    // prompt, the start of the generation prompt (a follow-up turn renders the answer there,
    // often not token for token as it was generated).
    int cache_boundary = 0;
    // Images and videos of the prompt, in prompt order (empty: a text prompt).
    std::vector<MediaInput> media;
    // Only run the prompt into the prefix cache: the request prefills what the cache does not
    // already hold, keeps its state as a prefix-cache entry, and ends with Length without a
    // token (max_new_tokens must be 0, no prompt_logprobs). The server's next-turn warming
    // submits these at the lowest priority; they are left out of the prefix-cache statistics.
    bool prefill_only = false;
};

struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0.0f; // natural log of the full softmax of the raw logits
};

struct GeneratedToken {
    int32_t id = 0;
    float logprob = 0.0f;
    std::vector<TokenLogprob> top_logprobs;
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);

// Speculative decoding counters (of one request, or of the engine).
struct SpeculativeStats {
    int64_t rounds = 0;  // verification rounds (steps that drafted)
    int64_t drafted = 0; // draft tokens proposed
    int64_t accepted = 0;
    // Position i (0-based) of a round: drafted, and accepted (with every earlier draft).
    std::vector<int64_t> drafted_at, accepted_at;
    int first_round_accepted = -1; // drafts accepted in the first round (-1: none yet)
    void record(int drafted_tokens, int accepted_tokens);
    void merge(const SpeculativeStats& other); // sums the counters (first_round_accepted stays)
};

struct RequestTimings {
    double queued_s = 0;      // submit -> first scheduled
    double first_token_s = 0; // submit -> first token (TTFT)
    double prefill_s = 0;     // first scheduled -> first token
    double decode_s = 0;      // first token -> finish
    int prompt_tokens = 0;
    int generated_tokens = 0;
    int cached_tokens = 0; // prompt tokens served from the prefix cache (first admission)
    int preemptions = 0;   // times the request was preempted and later recomputed
    SpeculativeStats speculative;
};

// What a request produced since the last read.
struct RequestUpdate {
    std::vector<TokenLogprob> prompt_logprobs; // with prompt_logprobs: prompt[1..] in order
    std::vector<GeneratedToken> tokens;
    bool finished = false;
    FinishReason reason = FinishReason::None;
    std::string error;      // set when reason == Error
    uint64_t seed = 0;      // the seed in use
    RequestTimings timings; // complete once finished
};

class RequestStream {
public:
    RequestStream() = default;
    // Blocks until new tokens arrive or the request ends. Returns false once a finished
    // request has been fully read.
    bool next(RequestUpdate& update);
    // As next(), waiting at most `timeout`: Update (update filled), Timeout (nothing new yet),
    // or Done (a finished request was fully read).
    enum class Wait { Update, Timeout, Done };
    Wait next_for(RequestUpdate& update, std::chrono::milliseconds timeout);
    // Asks the engine to stop this request; it ends within one step with reason Cancelled.
    void cancel();
    uint64_t id() const;

    struct State;
    explicit RequestStream(std::shared_ptr<State> state) : state_(std::move(state)) {}

private:
    std::shared_ptr<State> state_;
};

struct ModelInfo {
    std::string model_type;
    int64_t vocab_size = 0;  // logit rows
    int64_t token_limit = 0; // real token ids are < this (padded embeddings: fewer)
    int64_t max_context = 0;
    std::vector<int32_t> eos_token_ids;
    // Multimodal prompts: whether the checkpoint carries a vision tower, and its geometry (for
    // callers that lay out placeholders).
    bool vision = false;
    int32_t image_token_id = 0, video_token_id = 0, vision_start_token_id = 0,
            vision_end_token_id = 0;
    int32_t spatial_merge = 2, patch_size = 16, temporal_patch = 2;
    // The kernel route table in force: "builtin" or the table file (EngineOptions::route_table).
    std::string route_table = "builtin";
    // Tensor parallelism: the ranks (1: off) and their collective ("host", "device" or "nccl").
    int tensor_parallel = 1;
    std::string collective;
    bool expert_parallel = false; // routed experts split whole over the ranks
};

// Device memory held by the engine, in bytes.
struct MemoryStats {
    int64_t weights = 0;
    int64_t kv_cache = 0;
    int64_t state = 0;     // GDN conv + recurrent slots
    int64_t workspace = 0; // activation scratch of the largest step so far
};

// A snapshot of the engine's load (for metrics and admission).
struct EngineStats {
    int64_t waiting = 0;        // submitted, not yet admitted
    int64_t active = 0;         // admitted (holding a state slot and KV blocks)
    int64_t kv_blocks_used = 0; // of kv_blocks_total
    int64_t kv_blocks_total = 0;
    int64_t state_slots_used = 0; // of state_slots_total
    int64_t state_slots_total = 0;
    int64_t kv_blocks_cached = 0; // unreferenced blocks kept for the prefix cache (evictable)
    int64_t snapshots_device = 0; // GDN snapshots held on the device, of snapshots_device_total
    int64_t snapshots_device_total = 0;
    int64_t snapshots_host = 0;         // snapshots moved to host memory
    int64_t prefix_query_tokens = 0;    // prompt tokens looked up in the prefix cache (total)
    int64_t prefix_hit_tokens = 0;      // of those, served from the cache (total)
    int64_t prefill_only_tokens = 0;    // prompt tokens prefill_only requests computed (total)
    int64_t preemptions = 0;            // total
    int64_t steps = 0;                  // model steps run (total)
    int64_t max_step_sequences = 0;     // the most sequences batched into one step
    int64_t max_batch_tokens = 0;       // the step's row budget
    int64_t kv_capacity_tokens = 0;     // kv_blocks_total * block size
    int64_t step_scratch_bytes = 0;     // device memory kept free for the largest step's scratch
    std::string kv_dtype;               // the KV cache's storage: "bf16", "f32", "int8", "fp8"
    std::string gdn_state_dtype;        // the GDN recurrent state's storage: "f32" or "bf16"
    std::string speculative;            // "" or the method ("mtp")
    SpeculativeStats speculation;       // totals
    int64_t draft_tokens = 0;           // the draft tokens of the latest step that drafted
    int64_t graph_replays = 0;          // steps replayed from CUDA graphs (total)
    int64_t graph_verify_replays = 0;   // of those, verification steps (1 + K rows a sequence)
    int64_t draft_graph_replays = 0;    // draft proposals replayed from CUDA graphs (total)
    int64_t observe_graph_replays = 0;  // MTP alignments replayed from CUDA graphs (total)
    // Graph runs during steps (after start-up's EngineOptions::graph_warmup) that ran eagerly to
    // warm up or captured, in the decode, verification and draft graphs (total).
    int64_t graph_warmups = 0;
};

class Engine {
public:
    explicit Engine(const EngineOptions& options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Validates and queues a request; invalid requests raise ninfer::Error (InvalidArgument).
    RequestStream submit(GenerationRequest request);
    // Validates every request, then queues them together: the engine admits them in the same
    // step (as far as slots and KV blocks allow), so their schedule does not depend on how the
    // submitting thread and the engine thread interleave. One invalid request queues none.
    std::vector<RequestStream> submit_all(std::vector<GenerationRequest> requests);
    const ModelInfo& model_info() const;
    MemoryStats memory_stats() const;
    EngineStats stats() const; // thread-safe

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer
