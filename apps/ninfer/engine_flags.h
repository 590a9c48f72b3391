// Engine flags shared by the subcommands: each takes the groups that make sense for it, with
// one spelling and one help text everywhere.
#pragma once

#include "ninfer/engine.h"

namespace CLI {
class App;
class Validator;
}

namespace ninfer::app {

enum EngineFlags : unsigned {
    kDeviceFlags = 1u << 0,       // --device, --dtype, --threads
    kContextFlag = 1u << 1,       // --max-context
    kPrefillFlag = 1u << 2,       // --prefill-chunk (the engine's default, 512)
    kReferenceFlag = 1u << 3,     // --reference
    kBatchFlags = 1u << 4,        // --max-sequences, --max-batch-tokens
    kMemoryFlags = 1u << 5,       // --gpu-memory-utilization, --kv-cache-tokens
    kPrefixCacheFlags = 1u << 6,  // --no-prefix-cache, --snapshot-stride,
                                  // --prefix-cache-snapshots, --prefix-cache-host-gb
    kRandomWeightFlags = 1u << 7, // --random-weights, --config, --seed
    kSpeculativeFlags = 1u << 8,  // --spec, --draft-tokens
    // --prefill-chunk defaulting to kSingleRequestPrefillChunk: for commands that run one request
    // (or one batch) and keep no prefix cache for other users (run, chat, bench).
    kSingleRequestPrefill = 1u << 9,
};

// A prompt's chunk where no other request waits for the step (run, chat, bench): the step budget
// of CUDA's serving default. The engine's 512 serves many users (short steps beside their decode
// rows, a snapshot every 512 prompt tokens for shared prefixes); one request gains nothing from
// either (chat's turns resume from the end-of-prompt and end-of-generation snapshots) and pays in
// prefill speed: the fp8 35B-A3B prefills 8,192 tokens at 20.8k tok/s in chunks of 512, 38.5k in
// 2,048 and 47.8k in one chunk (bf16 16.0k against 43.6k; H200, 2026-12-07). Steps on the CPU
// stay within its 2,048-row budget.
inline constexpr int kSingleRequestPrefillChunk = 8192;

// Also installs the stderr load progress printer (load_progress.h) unless one is set.
void add_engine_options(CLI::App& app, EngineOptions& o, unsigned flags);

// A transform for a directory flag that may also name a model in the Hugging Face cache: a path
// that does not exist but reads as ORG/NAME becomes its snapshot directory (hf_cache.h), or an
// error naming the cache when it is not there.
CLI::Validator hub_model_path();

// {"method", "draft_tokens", "rounds", "drafted", "accepted", "accepted_per_position"} as one
// JSON object's text (accepted_per_position[i]: the share of rounds with at least i + 1 drafts
// that accepted the first i + 1 of them).
std::string speculative_json(const std::string& method, int draft_tokens,
                             const SpeculativeStats& s);

} // namespace ninfer::app
