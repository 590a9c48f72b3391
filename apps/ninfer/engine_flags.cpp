#include "engine_flags.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "hf_cache.h"
#include "load_progress.h"

namespace ninfer::app {
namespace {

// --device checked when the command line is parsed, so that the first error names the flag and
// the problem (an unknown name, or CUDA in a build without it) rather than an internal call.
std::string check_device(const std::string& name) {
    const bool cuda = name == "cuda" || name.rfind("cuda:", 0) == 0;
    if (name != "cpu" && !cuda)
        return "unknown device '" + name + "' (expected cpu, cuda or cuda:N)";
    if (name.rfind("cuda:", 0) == 0) {
        const std::string index = name.substr(5);
        if (index.empty() || index.size() > 3 ||
            index.find_first_not_of("0123456789") != std::string::npos)
            return "device '" + name + "': expected cuda:N, N a GPU index";
    }
#ifndef NINFER_HAS_CUDA
    if (cuda)
        return "this build of ninfer has no CUDA backend (it was built without CUDA: rebuild with "
               "nvcc installed and -DNINFER_CUDA=ON, or use --device cpu)";
#endif
    return {};
}

} // namespace

CLI::Validator hub_model_path() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            try {
                s = hub_path(s);
            } catch (const Error& e) {
                return e.what();
            }
            return {};
        },
        "DIR|ORG/NAME");
}

void add_engine_options(CLI::App& app, EngineOptions& o, unsigned flags) {
    // Every command that takes engine flags loads a model: show its progress on stderr.
    if (!o.on_load_progress) o.on_load_progress = stderr_load_progress();
    if (flags & kSpeculativeFlags) {
        app.add_option("--spec", o.speculative,
                       "Speculative decoding: mtp (the checkpoint's MTP head drafts), dflash or "
                       "dflash2 (a block-diffusion drafter, --draft-model); output is unchanged")
            ->check(CLI::IsMember({"mtp", "dflash", "dflash2"}));
        app.add_option("--draft-model", o.draft_model,
                       "The DFlash/DFlash2 drafter's directory, or ORG/NAME in the Hugging Face "
                       "cache (default: <model>/dflash or <model>/dflash2 when present); with "
                       "--random-weights its config.json")
            ->transform(hub_model_path());
        app.add_option("--draft-shortlist", o.draft_shortlist,
                       "Drafts from part of the lm_head: N (the rows of ids [0, N); mtp and "
                       "dflash) or a JSON array of ids (dflash); the drafts come from those rows "
                       "only (default: the whole head); output is unchanged");
        app.add_option("--draft-tokens", o.draft_tokens,
                       "Draft tokens per round with --spec: 1..8 (mtp), 1..15 (dflash), or auto "
                       "(picked each step from the measured acceptance and step times; the "
                       "default)")
            ->transform(CLI::Validator(
                [](std::string& s) -> std::string {
                    if (s == "auto") s = "0";
                    return {};
                },
                "K|auto"))
            ->check(CLI::Range(0, kMaxDraftTokens));
    }
    if (flags & kRandomWeightFlags) {
        app.add_flag("--random-weights", o.random_weights,
                     "Deterministic random weights made on the device (with --config)");
        app.add_option("--config", o.config_file, "HF config.json (with --random-weights)");
        // run's --seed is its sampling seed: there the weights' seed is --weight-seed.
        const bool sampling_seed = app.get_option_no_throw("--seed") != nullptr;
        app.add_option(sampling_seed ? "--weight-seed" : "--seed", o.random_seed,
                       "Seed of the random weights");
    }
    if (flags & kDeviceFlags) {
        app.add_option("--device", o.device, "cpu, cuda or cuda:N")
            ->check(CLI::Validator(check_device, "DEVICE"));
        app.add_option("--dtype", o.dtype, "auto, bf16 or f32");
        app.add_option("--fp8-weights", o.fp8_weights,
                       "FP8 checkpoints: auto (resident on CUDA with bf16, else dequantize), "
                       "resident (projections stay fp8), dequantize (to the compute dtype at "
                       "load) or w8a8 (CPU: resident, activations quantized to e4m3 per 128 "
                       "columns before each fp8 projection, as CUDA's W8A8 routes)")
            ->check(CLI::IsMember({"auto", "resident", "dequantize", "w8a8"}));
        app.add_option("--group-weights", o.group_weights,
                       "Groupwise w8/q4 checkpoints: auto (resident on CUDA with bf16, else "
                       "dequantize), resident (the quantized projections, MoE experts included, "
                       "stay codes and scales) or dequantize (to the compute dtype at load)")
            ->check(CLI::IsMember({"auto", "resident", "dequantize"}));
        app.add_option("--devices", o.devices,
                       "Split over several devices, e.g. cuda:0,cuda:1 (or 0,1): every layer's "
                       "post-attention block (norm + MLP/MoE) on the devices after the first, "
                       "which keeps the rest and gains their memory as KV; with "
                       "--tensor-parallel N, the N ranks' devices");
        app.add_option("--tensor-parallel,--tensor-parallel-size,--tp-size", o.tensor_parallel,
                       "Tensor parallelism over N ranks: each holds 1/N of every layer's heads "
                       "and rows (devices cuda:0..N-1, or --devices; N CPU ranks on the CPU)")
            ->check(CLI::PositiveNumber);
        app.add_flag("--expert-parallel,--enable-expert-parallel", o.expert_parallel,
                     "With --tensor-parallel N on a MoE model: each rank holds E/N routed "
                     "experts whole instead of 1/N of every expert's rows");
        app.add_option("--collective", o.collective,
                       "Tensor-parallel collectives: auto (nccl on CUDA where built, else host), "
                       "host (staged through host memory), nccl, or device (CUDA: kernels read "
                       "the other ranks' memory, so tensor-parallel steps run as CUDA graphs)")
            ->check(CLI::IsMember({"auto", "host", "device", "nccl"}));
        app.add_option("--route-table", o.route_table,
                       "Kernel route table: auto (the table ninfer tune wrote for this GPU, else "
                       "the built-in one), builtin, or a table file");
        app.add_option("--kv-dtype,--kv-cache-dtype", o.kv_dtype,
                       "KV cache storage: bf16 (the activation dtype; also auto), int8 (an f16 "
                       "scale per 64 dims) or fp8 (e4m3, a scale per token and head; also "
                       "fp8_e4m3); int8 and fp8 hold about twice the tokens")
            ->transform(CLI::Validator(
                [](std::string& s) -> std::string { // vLLM's spellings of the same choices
                    if (s == "auto" || s == "bfloat16") s = "bf16";
                    if (s == "fp8_e4m3") s = "fp8";
                    return {};
                },
                ""))
            ->check(CLI::IsMember({"bf16", "int8", "fp8"}));
        app.add_option("--gdn-state-dtype,--mamba-ssm-cache-dtype", o.gdn_state_dtype,
                       "GDN recurrent state storage: f32 (output independent of batching and "
                       "chunking) or bf16 (half the state bytes per step and per sequence; each "
                       "step's store rounds)")
            ->check(CLI::IsMember({"f32", "bf16", "float32", "bfloat16"}));
        app.add_option("--threads", o.threads,
                       "CPU threads (0: the CPUs this process may use, less one when that is the "
                       "whole machine)")
            ->check(CLI::NonNegativeNumber);
        app.add_flag("!--enforce-eager", o.cuda_graphs,
                     "CUDA: launch every step's kernels eagerly (no CUDA graphs)");
        app.add_option("--graph-warmup", o.graph_warmup,
                       "CUDA: capture the decode graphs (and speculative decoding's, for every K "
                       "it may choose) at start-up for batch buckets up to N sequences (-1: all "
                       "the engine runs at once; 0: none, each is captured at its second step)")
            ->check(CLI::Range(-1, 1 << 20));
    }
    if (flags & kContextFlag)
        app.add_option("--max-context,--max-model-len,--context-length", o.max_context,
                       "Longest sequence in tokens")
            ->check(CLI::NonNegativeNumber);
    if (flags & kSingleRequestPrefill) o.prefill_chunk = kSingleRequestPrefillChunk;
    if (flags & (kPrefillFlag | kSingleRequestPrefill))
        app.add_option("--prefill-chunk", o.prefill_chunk, "Prompt tokens per step")
            ->capture_default_str()
            ->check(CLI::PositiveNumber);
    if (flags & kReferenceFlag)
        app.add_flag("--reference", o.cpu_reference, "Use the CPU reference ops (slow)");
    if (flags & kBatchFlags) {
        app.add_option("--max-sequences,--max-num-seqs,--max-running-requests", o.max_sequences,
                       "Sequences run at once (0: from memory)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--max-batch-tokens,--max-num-batched-tokens", o.max_batch_tokens,
                       "Most rows (prompt and decode tokens) in one step (0: 8192 on CUDA, 2048 "
                       "on the CPU)")
            ->check(CLI::NonNegativeNumber);
    }
    if (flags & kMemoryFlags) {
        app.add_option("--gpu-memory-utilization,--mem-fraction-static", o.gpu_memory_utilization,
                       "Share of the GPU's memory the engine may hold, in (0, 1]")
            ->check(CLI::Validator(
                [](std::string& s) -> std::string {
                    double v = 0;
                    size_t used = 0;
                    try {
                        v = std::stod(s, &used);
                    } catch (const std::exception&) {
                        used = 0;
                    }
                    if (used != s.size() || !(v > 0 && v <= 1))
                        return "must be a number in (0, 1], got " + s;
                    return {};
                },
                "(0, 1]"));
        app.add_option("--kv-cache-tokens", o.kv_cache_tokens,
                       "KV cache capacity in tokens (0: from memory)")
            ->check(CLI::NonNegativeNumber);
    }
    if (flags & kPrefixCacheFlags) {
        app.add_flag("!--no-prefix-cache,!--no-enable-prefix-caching,!--disable-radix-cache,"
                     "--enable-prefix-caching",
                     o.prefix_cache,
                     "--no-prefix-cache: do not share prompt prefixes (KV blocks and state "
                     "snapshots) across requests (--enable-prefix-caching: share them, the "
                     "default)");
        app.add_option("--snapshot-stride", o.snapshot_stride,
                       "Tokens between GDN state snapshots in long prompts, a multiple of the KV "
                       "block size (0: the larger of 512 and --prefill-chunk, so a chunk is never "
                       "cut)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--decode-snapshot-stride", o.decode_snapshot_stride,
                       "Generated tokens between GDN state snapshots of a decoding sequence, so "
                       "a next turn whose text re-tokenizes differently still resumes near "
                       "where it differs (0: none)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--prefix-cache-snapshots", o.prefix_cache_snapshots,
                       "GDN state snapshot slots on the device (0: from memory)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--prefix-cache-host-gb", o.prefix_cache_host_gb,
                       "Host memory (GB) for snapshots evicted from the device (0: none)")
            ->check(CLI::NonNegativeNumber);
    }
}

std::string speculative_json(const std::string& method, int draft_tokens,
                             const SpeculativeStats& s) {
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < s.drafted_at.size(); ++i)
        per.push_back(s.drafted_at[i] > 0 ? double(s.accepted_at[i]) / double(s.drafted_at[i])
                                          : 0.0);
    nlohmann::json out = {{"method", method},
                          {"draft_tokens", draft_tokens > 0 ? nlohmann::json(draft_tokens)
                                                            : nlohmann::json("auto")},
                          {"rounds", s.rounds},
                          {"drafted", s.drafted},
                          {"accepted", s.accepted},
                          {"acceptance_rate",
                           s.drafted > 0 ? double(s.accepted) / double(s.drafted) : 0.0},
                          {"tokens_per_round",
                           s.rounds > 0 ? 1.0 + double(s.accepted) / double(s.rounds) : 0.0},
                          {"accepted_per_position", per}};
    return out.dump();
}

} // namespace ninfer::app
