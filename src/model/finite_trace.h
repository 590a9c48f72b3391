// Diagnosis of non-finite logits (NINFER_FINITE_TRACE=1): the model checks its activations on
// the host after each block of each layer and reports, once per forward, the first tensor that
// holds a non-finite value: the layer, the block, the step's rows and sequences, and which
// sequences' rows are affected (position of their first row). Off by default (one branch a
// block); on, every check synchronises the device and downloads the tensor. Steps captured into
// CUDA graphs go unchecked (--enforce-eager checks every step).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/seq_batch.h"

namespace ninfer::model {

class FiniteTrace {
public:
    static bool enabled();
    // Starts a forward over `seqs` (the report names its sequences).
    explicit FiniteTrace(const ops::SeqBatch& seqs) : seqs_(seqs) {}
    // Checks rows [0, rows) of x (2-D, float) after `block` of layer `layer`; reports the first
    // failure of this forward to stderr. No-op when disabled.
    void check(const ops::ExecContext& ctx, const TensorView& x, int32_t layer, const char* block);

private:
    const ops::SeqBatch& seqs_;
    bool reported_ = false;
};

} // namespace ninfer::model
