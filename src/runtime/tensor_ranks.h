// The ranks of `--tensor-parallel N` (model/tensor_parallel.h): each rank's context (device,
// stream) and collective, from the engine's options.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/collective.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

struct TensorRanks {
    // Ranks 1..N-1's streams. Declared before the collectives so that they are destroyed after
    // them: a collective's device buffers are freed on its rank's stream (a buffer freed on a
    // destroyed stream is undefined; the device collective's sum buffer was).
    std::vector<std::shared_ptr<void>> streams;
    std::vector<ops::ExecContext> contexts; // rank 0 (the engine's context) first
    std::vector<std::shared_ptr<ops::Collective>> collectives;

    int size() const { return int(contexts.size()); }
    std::vector<ops::ExecContext> peers() const;
    // Ranks on rank 0's device (they share its memory: the KV budget is divided among them).
    int on_first_device() const;
};

// ranks contexts: `devices` when given (exactly `ranks` of them, the first ctx's), else ranks
// devices from ctx's on (CPU: ranks CPU contexts). collective: "auto", "host", "device" or
// "nccl" (ops/collective.h); auto takes nccl on CUDA where built and each rank has its own GPU,
// else host.
TensorRanks make_tensor_ranks(const ops::ExecContext& ctx, int ranks,
                              const std::vector<Device>& devices, const std::string& collective);

} // namespace ninfer::runtime
