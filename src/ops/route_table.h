// Route tables: which kernel a CUDA op takes over its row (or pair) domain, per GPU.
//
// A route decision is one op's choice among its candidate kernels as a function of one integer
// (rows of x, rows per sequence, (token, expert) pairs), for one shape class of the op (a weight
// format, a weight size). Its table is a list of bands: values up to and including `last` take the
// band's kernel; the last band is unbounded. The built-in table holds the boundaries measured on
// the H200 (bench/NOTES.md); `ninfer tune` measures them on the GPU at hand and writes a table
// keyed by GPU name, SM count and CUDA version (route_table_file), which the engine puts in force
// at startup (set_active_route_table) and `ninfer info` names.
//
// The three failure shapes of tuned boundaries that recurred in the seeds, and the guard for each:
//   - a small-T kernel routed past its useful range: every kernel declares its domain
//     (RouteKernel::max), and a table whose band gives a kernel values outside it is refused;
//   - a tile past the columns it supports (a c128 tile past 128 columns): a table only orders
//     kernels; each op still asks its kernel's fits() at every call and falls back when it
//     does not fit, so no table can route a shape to a kernel that cannot take it;
//   - a kernel that never wins owning a band: a tuned table carries its measurements, and each of
//     its bands must hold a measured point where its kernel was the fastest.
// Host code (no CUDA): the CPU build compiles and tests it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::ops {

// The decisions the CUDA dispatchers consult (the names in a table file).
enum class RouteId {
    LinearBf16Small,  // "linear.bf16.small": BF16 linear, weights <= 1.5 MiB; rows
    LinearBf16Medium, // "linear.bf16.medium": weights <= 8 MiB; rows
    LinearBf16Large,  // "linear.bf16.large": weights <= 16 MiB; rows
    LinearBf16Huge,   // "linear.bf16.huge": weights > 16 MiB; rows
    LinearGrouped,    // "linear.grouped": groupwise W8/Q4 linear; rows
    LinearFp8Small,   // "linear.fp8.small": block-wise fp8 linear, < 16 Mi weights; rows
    LinearFp8Large,   // "linear.fp8.large": >= 16 Mi weights; rows
    GatedDeltaRule,   // "gated_delta_rule": rows of the longest sequence
    MoeBlockDense,    // "moe_block.dense": moe_block with BF16/F32 weights; tokens x top_k
    MoeBlockFp8,      // "moe_block.fp8"
    MoeBlockGrouped,  // "moe_block.grouped"
    MoeExpertsBf16,   // "moe_experts.bf16": moe_experts' grouped route, bf16 stacks; tokens x top_k
    AttentionPrefillBf16,  // "attention_prefill.bf16": paged_attention's prefill route, bf16
                           // planes; rows of the longest sequence (from kFlashMinRows)
    MoeExpertsFp8,         // "moe_experts.fp8": moe_experts' grouped route, block-wise fp8 stacks;
                           // tokens x top_k
    AttentionPrefillCoded, // "attention_prefill.coded": the same over int8 / fp8 planes (cudnn
                           // through bf16 staging); rows of the longest sequence
    Count
};
inline constexpr int kRouteCount = int(RouteId::Count);
// Kernel indices (route_catalog's order): kernel 0 is each decision's small-value route.
inline constexpr int kRouteGemv = 0;        // linear.*: the GEMV; 1: cuBLAS (after dequantizing)
inline constexpr int kRouteTensorCores = 1; // linear.fp8.*: the tensor-core GEMM on bf16 x
inline constexpr int kRouteW8a8 = 2;        //   cuBLASLt's fp8 matmul on quantized x
inline constexpr int kRouteRecurrent = 0;   // gated_delta_rule: token-serial
inline constexpr int kRouteChunked = 1;     //   chunked (WY/UT)
inline constexpr int kRouteFusedDecode = 0; // moe_block.*: the two fused decode kernels
inline constexpr int kRouteComposed = 1;    //   the composition (grouped GEMMs)
inline constexpr int kRouteMmaSync = 0;     // moe_experts.bf16: the mma.sync tile kernels
inline constexpr int kRouteWgmma = 1;       //   CUTLASS's sm_90 wgmma/TMA grouped GEMM
inline constexpr int kRouteFlash = 0;       // attention_prefill.bf16: the mma.sync flash kernel
inline constexpr int kRouteCudnn = 1;       //   cuDNN's fused attention (ops/cuda/attention_cudnn.h)
inline constexpr int kRouteMmaSyncFp8 = 0;  // moe_experts.fp8: mma.sync tiles on bf16 activations
inline constexpr int kRouteWgmmaW8a8 = 1;   //   CUTLASS's block-scaled fp8 wgmma on fp8 activations
inline constexpr int kRouteWgmmaW8a8Swap = 2; //   the same, operands swapped (decode batches)
inline constexpr int64_t kRouteUnbounded = INT64_MAX;

// A candidate kernel of a decision and the values it is built for.
struct RouteKernel {
    std::string name;
    int64_t max = kRouteUnbounded; // largest value it may be routed (the domain starts at 1)
};
struct RouteDecisionInfo {
    RouteId id;
    std::string name;   // as in the table file
    std::string domain; // what the value counts
    std::vector<RouteKernel> kernels;
};
// The BF16 linear decision of a weight of this many bytes.
RouteId linear_bf16_route(int64_t weight_bytes);

// Every decision, indexed by RouteId.
const std::vector<RouteDecisionInfo>& route_catalog();
// Whether decision id's kernel can run in this process at all: false for a kernel that needs a
// library that is missing (attention_prefill.bf16's cudnn without libcudnn). `ninfer tune`
// measures only those that can; a dispatcher asks its kernel's own fits() at every call anyway.
bool route_kernel_available(RouteId id, int kernel);
// The library behind attention_prefill.bf16's cudnn kernel: "cuDNN 9.x.y from libcudnn.so.9", or
// why it is not there (`ninfer info`).
std::string cudnn_library_status();
const RouteDecisionInfo& route_info(RouteId id);

struct RouteBand {
    int64_t last = kRouteUnbounded; // values (previous band's last, last] take `kernel`
    int kernel = 0;                 // index into the decision's kernels
};
// One measured point of `ninfer tune`: the kernel's time at value `at`.
struct RouteMeasurement {
    int64_t at = 0;
    int kernel = 0;
    double us = 0.0;
};
struct RouteDecision {
    std::vector<RouteBand> bands;              // ascending; the last one unbounded
    std::vector<RouteMeasurement> measurements; // a tuned table's evidence (empty: built-in)
};

// The device a table was tuned on.
struct RouteDevice {
    std::string gpu;      // the CUDA device name, e.g. "NVIDIA H200"
    int sm_count = 0;     // streaming multiprocessors
    int cuda_version = 0; // the CUDA runtime's version, e.g. 13000
};

class RouteTable {
public:
    // The H200-measured boundaries the dispatchers used before route tables.
    static RouteTable builtin();
    // A table file's text; `source` (its path) names it in errors. Refuses (Error::Invalid)
    // malformed JSON, unknown decisions or kernels, bands that do not ascend, an unbounded last
    // band missing, a kernel routed past its domain, a tuned band whose kernel never won a
    // measured point in it. Decisions the file leaves out keep their built-in bands.
    static RouteTable parse(const std::string& text, const std::string& source);
    // A table from measurements (ninfer tune), by_id[RouteId] (empty: the built-in bands): each
    // measured value goes to its fastest kernel, runs of one winner become bands (a boundary at
    // the last value a kernel won; values below the first measured one take its winner), and the
    // last band is unbounded, so the largest measured value must be won by an unbounded kernel.
    static RouteTable from_measurements(const RouteDevice& device,
                                        const std::vector<std::vector<RouteMeasurement>>& by_id);

    // This table with decision id's bands replaced (validated; no measurements).
    RouteTable with_bands(RouteId id, const std::vector<RouteBand>& bands) const;
    // This table with decision id giving `kernel` every value up to `value` and an unbounded
    // kernel the rest: how `ninfer tune` forces one kernel at a value. Refused (as with_bands)
    // when `value` is past the kernel's domain.
    RouteTable forcing(RouteId id, int kernel, int64_t value) const;

    // The kernel (an index into route_info(id).kernels) for `value` (>= 1; below 1 counts as 1).
    int route(RouteId id, int64_t value) const;
    // The band boundary of kernel `kernel`: the largest value routed to it, 0 when none.
    int64_t last_value_of(RouteId id, int kernel) const;
    const RouteDecision& decision(RouteId id) const { return decisions_[size_t(id)]; }
    const RouteDevice& device() const { return device_; }
    // "builtin", or the file the table came from.
    const std::string& source() const { return source_; }
    bool tuned() const { return source_ != "builtin"; }
    std::string to_json() const;

private:
    RouteTable() = default;
    void validate() const;
    std::vector<RouteDecision> decisions_;
    RouteDevice device_;
    std::string source_ = "builtin";
};

// The table the CUDA dispatchers consult (process-wide): the built-in one until
// set_active_route_table. The engine sets it at startup, before any op runs. Dispatchers read it
// lock-free, and every table set stays alive, so a table replaced while ops run on other threads
// is never freed under them (those ops may still take the old table's routes); setting an equal
// table again is a no-op.
const RouteTable& active_route_table();
void set_active_route_table(const RouteTable& table);

// Where `ninfer tune` writes and the engine looks for the table of `device`:
// <cache_dir>/routes/<gpu>-sm<count>-cuda<version>.json, the GPU name's characters other than
// letters, digits, '.', '-' and '_' as '_'. cache_dir: $NINFER_CACHE_DIR, else
// $XDG_CACHE_HOME/ninfer, else $HOME/.cache/ninfer (route_cache_dir; empty when none is set).
std::string route_cache_dir();
std::string route_table_file(const std::string& cache_dir, const RouteDevice& device);

// The table `choice` names (EngineOptions::route_table): "builtin"; "auto": the file of `device`
// under route_cache_dir() when there is one, else the built-in table (and the built-in one when
// device is null: no CUDA device); otherwise the path of a table file, which must exist. A file
// that fails validation, or that was tuned on another device than `device`, is an error naming it.
RouteTable resolve_route_table(const std::string& choice, const RouteDevice* device);

} // namespace ninfer::ops
