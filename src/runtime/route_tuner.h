// `ninfer tune`'s measurements: every route decision's candidate kernels (ops/route_table.h)
// timed on one CUDA device over the decision's values, at Qwen3.6's shapes, cold L2.
//   linear.bf16.*: the router (257 x 2048, 1 MiB), the shared expert's gate_up (1024 x 2048, 4
//     MiB), the 35B's GDN out_proj (2048 x 4096, 16 MiB) and its GDN in_proj (12352 x 2048, 48
//     MiB), over 1..16 rows;
//   linear.grouped: a q4 (groups of 32) 4096 x 2048 projection over 1..128 rows;
//   linear.fp8.*: block-wise fp8 2048 x 4096 and 12352 x 2048 projections over 1..256 rows;
//   gated_delta_rule: one sequence, the 35B's heads (32 value heads of 128, 16 key heads), over
//     1..128 rows;
//   moe_block.dense / .fp8 / .grouped: the 35B's block (256 experts, top-8, H 2048, I = Is =
//     512) in bf16, block-wise fp8 (128 x 128) and q4 (groups of 32), over 1..160 tokens;
//   moe_experts.bf16 / .fp8: its experts' grouped GEMMs (bf16 stacks; fp8 stacks through
//     moe_block), over 64..8,192 tokens;
//   attention_prefill.bf16: paged_attention over one prompt with its heads (16 / 2, d 256),
//     16..8,192 rows.
// Timing: each measurement is the median over `reps` of (the mean of `inner` calls, each after an
// L2-evicting 256 MiB write) minus (the same writes alone), so a weight never sits in L2 as it
// would not in the model, where 40 layers' other weights pass between two of its uses. The
// kernel is forced by putting a table with that kernel at that value in force (the ops' own
// dispatch runs, fits() included: shapes a kernel cannot take fall back, and then time as the
// fallback).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/route_table.h"

namespace ninfer::runtime {

struct TuneOptions {
    Device device = Device::cuda(0);
    int reps = 5;       // timings per measurement (the median is kept)
    int inner = 10;     // calls per timing
    bool quick = false; // a few values per decision (the tests)
    // Every dimension of the shapes above divided by this: the CPU tests run the whole harness on
    // small shapes (device cpu is taken only with shrink > 1; the CPU has no routes to measure).
    int64_t shrink = 1;
    std::function<void(const std::string&)> progress; // one line per decision, or null
};

// The values decision `id` is measured at (rows; pairs for moe_block.*, tokens x 8): past every
// bounded kernel's domain at the top, so that the tuned table ends on an unbounded kernel.
std::vector<int64_t> tune_values(ops::RouteId id, bool quick);

// The measurements by RouteId (ops::RouteTable::from_measurements' input). Leaves the built-in
// table in force when it returns.
std::vector<std::vector<ops::RouteMeasurement>> measure_routes(const TuneOptions& options);

} // namespace ninfer::runtime
