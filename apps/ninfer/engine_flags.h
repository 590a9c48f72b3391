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
    kPrefillFlag = 1u << 2,       // --prefill-chunk
    kReferenceFlag = 1u << 3,     // --reference
    kBatchFlags = 1u << 4,        // --max-sequences, --max-batch-tokens
    kMemoryFlags = 1u << 5,       // --gpu-memory-utilization, --kv-cache-tokens
    kPrefixCacheFlags = 1u << 6,  // --no-prefix-cache, --snapshot-stride,
                                  // --prefix-cache-snapshots, --prefix-cache-host-gb
    kRandomWeightFlags = 1u << 7, // --random-weights, --config, --seed
    kSpeculativeFlags = 1u << 8,  // --spec, --draft-tokens
};

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
