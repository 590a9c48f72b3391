#include "ops/route_table.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/gated_delta_rule_chunked.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"

namespace ninfer::ops {
namespace {

using json = nlohmann::json;

constexpr int64_t kMiB = int64_t(1) << 20;

// The candidates of each decision and their domains. Kernel 0 is the small-value route.
//   gemv: ops/cuda/linear_gemv.h's kGemvMaxRows (8) rows at most;
//   grouped gemv: runs again per 8 rows; past 64 rows it reads the codes 8+ times, never a win;
//   recurrent gated_delta_rule: token-serial, any length; chunked: any length (its fits() asks
//   for dv <= 128 and the shared memory);
//   the fused MoE decode kernels: measured in the model up to 1,024 pairs (bench/NOTES.md).
const std::vector<RouteDecisionInfo>& catalog_storage() {
    static const std::vector<RouteDecisionInfo> catalog = {
        {RouteId::LinearBf16Small,
         "linear.bf16.small",
         "rows (weights <= 1.5 MiB)",
         {{"gemv", cuda::kGemvMaxRows}, {"cublas"}}},
        {RouteId::LinearBf16Medium,
         "linear.bf16.medium",
         "rows (weights <= 8 MiB)",
         {{"gemv", cuda::kGemvMaxRows}, {"cublas"}}},
        {RouteId::LinearBf16Large,
         "linear.bf16.large",
         "rows (weights <= 16 MiB)",
         {{"gemv", cuda::kGemvMaxRows}, {"cublas"}}},
        {RouteId::LinearBf16Huge,
         "linear.bf16.huge",
         "rows (weights > 16 MiB)",
         {{"gemv", cuda::kGemvMaxRows}, {"cublas"}}},
        {RouteId::LinearGrouped, "linear.grouped", "rows", {{"gemv", 64}, {"dequantize_cublas"}}},
        // fp8: the GEMV, the tensor-core GEMM to kFp8TensorCoreMaxRows rows, W8A8; a kernel
        // that does not take the shape (W8A8 off sm_90) falls back in linear_fp8_route's order.
        {RouteId::LinearFp8Small,
         "linear.fp8.small",
         "rows (fp8 weights < 16 Mi)",
         {{"gemv", cuda::kGemvMaxRows}, {"tensor_cores", cuda::kFp8TensorCoreMaxRows}, {"w8a8"}}},
        {RouteId::LinearFp8Large,
         "linear.fp8.large",
         "rows (fp8 weights >= 16 Mi)",
         {{"gemv", cuda::kGemvMaxRows}, {"tensor_cores", cuda::kFp8TensorCoreMaxRows}, {"w8a8"}}},
        {RouteId::GatedDeltaRule,
         "gated_delta_rule",
         "rows of the longest sequence",
         {{"recurrent"}, {"chunked"}}},
        {RouteId::MoeBlockDense,
         "moe_block.dense",
         "tokens x top_k",
         {{"fused_decode", 1024}, {"composed"}}},
        {RouteId::MoeBlockFp8,
         "moe_block.fp8",
         "tokens x top_k",
         {{"fused_decode", 1024}, {"composed"}}},
        {RouteId::MoeBlockGrouped,
         "moe_block.grouped",
         "tokens x top_k",
         {{"fused_decode", 1024}, {"composed"}}},
        {RouteId::MoeExpertsBf16,
         "moe_experts.bf16",
         "tokens x top_k (grouped route)",
         {{"mma_sync"}, {"wgmma"}}},
        {RouteId::AttentionPrefillBf16,
         "attention_prefill.bf16",
         "rows of the longest sequence (prefill route)",
         {{"flash"}, {"cudnn"}}},
        {RouteId::MoeExpertsFp8,
         "moe_experts.fp8",
         "tokens x top_k (grouped route, fp8 stacks)",
         {{"mma_sync"}, {"wgmma_w8a8"}, {"wgmma_w8a8_swap"}}},
        {RouteId::AttentionPrefillCoded,
         "attention_prefill.coded",
         "rows of the longest sequence (prefill route, int8 / fp8 planes)",
         {{"flash"}, {"cudnn"}}},
    };
    return catalog;
}

// The H200's boundaries (bench/NOTES.md): kernel 0 to the first value, kernel 1 past it.
//   linear.bf16: gemv_preferred's sizes (GEMV to 8 / 4 / 2 / 1 rows by weight size);
//   linear.grouped: the GEMV's passes to 32 rows;
//   gated_delta_rule: the recurrence below 32 rows (ops/cuda/gated_delta_rule_chunked.h);
//   moe_block: the fused kernels to 64 pairs (dense), 192 (fp8: 0.214 against 0.263 ms at 128,
//   0.414 against 0.372 at 256), 192 (groupwise: its composition reads 9x the bytes);
//   moe_experts.bf16: the wgmma grouped GEMM from kMoeWgmmaFrom pairs. Measured on an H100
//   (bench_prefill_ops moe, the 35B's experts, one run): 65,536 pairs 1.78 against 2.01 ms;
//   16,384 pairs 0.85 against 0.84 ms and below, mma.sync wins by 2-7% (the tile table's 64-row
//   tiles fit an expert's few rows; wgmma's 128-row tiles idle). A GPU without the kernel, or a
//   shape it does not take, falls back to mma.sync.
constexpr int64_t kMoeWgmmaFrom = 32768;
constexpr int64_t kCudnnPrefillFrom = 512;
// moe_experts.fp8: the swapped W8A8 GEMM to 512 tokens of the 35B's top-8 (see builtin_bands).
constexpr int64_t kMoeW8a8SwapLast = 4096;
int64_t builtin_boundary(RouteId id) {
    switch (id) {
    case RouteId::LinearBf16Small: return 8;
    case RouteId::LinearBf16Medium: return 4;
    case RouteId::LinearBf16Large: return 2;
    case RouteId::LinearBf16Huge: return 1;
    case RouteId::LinearGrouped: return 32;
    case RouteId::GatedDeltaRule: return cuda::kGdnChunkedMinRows - 1;
    case RouteId::MoeBlockDense: return 64;
    case RouteId::MoeBlockFp8: return 192;
    case RouteId::MoeBlockGrouped: return 192;
    default: break;
    }
    fail_invalid("route table: no two-kernel decision ", int(id));
}

// linear.fp8 (ops/cuda/linear_fp8.h, measured on the H200 with bench_fp8_ops): on smaller
// weights the GEMV to 8 rows, the tensor cores to kFp8TensorCoreMaxRows, W8A8 past them; on
// weights of kFp8W8a8LargeWeight or more the GEMV to kFp8GemvRows, W8A8 from there (its ~21 us
// fixed cost pays from kFp8W8a8MinRows rows).
static_assert(cuda::kFp8W8a8MinRows == cuda::kFp8GemvRows + 1,
              "linear.fp8.large: W8A8 starts where the GEMV stops");
std::vector<RouteBand> builtin_bands(RouteId id) {
    switch (id) {
    case RouteId::LinearFp8Small:
        return {{cuda::kGemvMaxRows, kRouteGemv},
                {cuda::kFp8TensorCoreMaxRows, kRouteTensorCores},
                {kRouteUnbounded, kRouteW8a8}};
    case RouteId::LinearFp8Large:
        return {{cuda::kFp8GemvRows, kRouteGemv}, {kRouteUnbounded, kRouteW8a8}};
    case RouteId::MoeExpertsBf16:
        return {{kMoeWgmmaFrom - 1, kRouteMmaSync}, {kRouteUnbounded, kRouteWgmma}};
    // attention_prefill.bf16: cuDNN's fused attention from kCudnnPrefillFrom rows of the longest
    // sequence, flash below. Measured on an H100 (bench_prefill_ops attention, the 27B's and the
    // 35B's heads, one run): 512 rows 0.050 / 0.051 against 0.079 / 0.086 ms, 2,048 rows 0.138 /
    // 0.167 against 0.303 / 0.470, 8,192 rows 0.98 / 1.39 against 4.11 / 6.08 ms. Where cuDNN is
    // missing, older than 9.10.2, capturing or without a plan, flash runs.
    case RouteId::AttentionPrefillBf16:
        return {{kCudnnPrefillFrom - 1, kRouteFlash}, {kRouteUnbounded, kRouteCudnn}};
    // attention_prefill.coded: cuDNN over bf16 staging of the blocks a step reads
    // (ops/cuda/attention_cudnn_coded.cu) from kCudnnPrefillFrom rows as well. Measured on an
    // H100 (bench_prefill_ops attention, the 35B's heads, one run): int8 / fp8 planes at 512 rows
    // 0.063 / 0.064 against the coded flash kernel's 0.083 / 0.081 ms, 2,048 rows 0.148 / 0.147
    // against 0.334 / 0.316, 8,192 rows 0.989 / 0.987 against 4.71 / 4.48 ms.
    case RouteId::AttentionPrefillCoded:
        return {{kCudnnPrefillFrom - 1, kRouteFlash}, {kRouteUnbounded, kRouteCudnn}};
    // moe_experts.fp8: the W8A8 wgmma grouped GEMM everywhere it runs (sm_90 with CUTLASS; else
    // mma_sync), operands swapped to kMoeW8a8SwapLast pairs (an expert then owns a few rows: 32-row
    // tiles of them instead of 128). Measured on an H100 (bench_fp8_ops, the 35B's moe_block,
    // one run): W8A8 0.167 / 0.317 / 0.458 / 0.937 / 1.571 ms against mma.sync's 0.179 / 0.376 /
    // 0.568 / 1.400 / 2.424 at T = 8 / 32 / 128 / 4,096 / 8,192 tokens; swapped against W8A8
    // 0.216 / 0.279 / 0.351 / 0.406 / 0.436 against 0.239 / 0.317 / 0.403 / 0.460 / 0.481 ms at
    // T = 16 / 32 / 64 / 128 / 512, but 1.250 against 0.940 at 4,096.
    case RouteId::MoeExpertsFp8:
        return {{kMoeW8a8SwapLast, kRouteWgmmaW8a8Swap}, {kRouteUnbounded, kRouteWgmmaW8a8}};
    default: return {{builtin_boundary(id), 0}, {kRouteUnbounded, 1}};
    }
}

int kernel_index(const RouteDecisionInfo& info, const std::string& name,
                 const std::string& source) {
    for (size_t k = 0; k < info.kernels.size(); ++k)
        if (info.kernels[k].name == name) return int(k);
    std::string known;
    for (const RouteKernel& k : info.kernels) known += (known.empty() ? "" : ", ") + k.name;
    fail_invalid("route table ", source, ": ", info.name, " has no kernel '", name,
                 "' (its kernels: ", known, ")");
}

const RouteDecisionInfo* find_decision(const std::string& name) {
    for (const RouteDecisionInfo& d : catalog_storage())
        if (d.name == name) return &d;
    return nullptr;
}

int64_t json_value(const json& j, const char* key, const std::string& where) {
    const auto it = j.find(key);
    require(it != j.end() && it->is_number_integer(), where, ": '", key,
            "' must be an integer, got ", it == j.end() ? std::string("nothing") : it->dump());
    return it->get<int64_t>();
}

std::string json_string(const json& j, const char* key, const std::string& where) {
    const auto it = j.find(key);
    require(it != j.end() && it->is_string(), where, ": '", key, "' must be a string");
    return it->get<std::string>();
}

// The active table: read lock-free by the dispatchers (an atomic pointer); every table ever set
// stays alive (the engine sets one at startup, so a few per process), so a reference a
// dispatcher holds never dangles.
std::mutex& tables_mutex() {
    static std::mutex m;
    return m;
}
std::vector<std::unique_ptr<const RouteTable>>& tables_set() {
    static std::vector<std::unique_ptr<const RouteTable>> tables;
    return tables;
}
std::atomic<const RouteTable*>& active_pointer() {
    static std::atomic<const RouteTable*> active{nullptr};
    return active;
}

} // namespace

RouteId linear_bf16_route(int64_t weight_bytes) {
    if (2 * weight_bytes <= 3 * kMiB) return RouteId::LinearBf16Small;
    if (weight_bytes <= 8 * kMiB) return RouteId::LinearBf16Medium;
    if (weight_bytes <= 16 * kMiB) return RouteId::LinearBf16Large;
    return RouteId::LinearBf16Huge;
}

const std::vector<RouteDecisionInfo>& route_catalog() {
    return catalog_storage();
}

const RouteDecisionInfo& route_info(RouteId id) {
    require(int(id) >= 0 && int(id) < kRouteCount, "route table: no decision ", int(id));
    return catalog_storage()[size_t(id)];
}

bool route_kernel_available(RouteId id, int kernel) {
    if ((id == RouteId::AttentionPrefillBf16 || id == RouteId::AttentionPrefillCoded) &&
        kernel == kRouteCudnn)
        return cuda::cudnn_available();
    return true;
}

std::string cudnn_library_status() {
    return cuda::cudnn_status();
}

RouteTable RouteTable::builtin() {
    RouteTable t;
    t.decisions_.resize(kRouteCount);
    for (int i = 0; i < kRouteCount; ++i)
        t.decisions_[size_t(i)].bands = builtin_bands(RouteId(i));
    t.validate();
    return t;
}

RouteTable RouteTable::parse(const std::string& text, const std::string& source) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        fail_invalid("route table ", source, " is not JSON: ", e.what());
    }
    require(j.is_object(), "route table ", source, ": a JSON object expected");
    RouteTable t = builtin();
    t.source_ = source;
    const std::string where = "route table " + source;
    const auto dev = j.find("device");
    require(dev != j.end() && dev->is_object(), where, ": 'device' (gpu, sm_count, cuda_version) "
                                                       "missing");
    t.device_.gpu = json_string(*dev, "gpu", where + " device");
    t.device_.sm_count = int(json_value(*dev, "sm_count", where + " device"));
    t.device_.cuda_version = int(json_value(*dev, "cuda_version", where + " device"));
    const auto decisions = j.find("decisions");
    require(decisions != j.end() && decisions->is_object(), where, ": 'decisions' missing");
    for (const auto& [name, d] : decisions->items()) {
        const RouteDecisionInfo* info = find_decision(name);
        require(info != nullptr, where, ": unknown decision '", name, "'");
        const std::string at = where + " " + name;
        require(d.is_object() && d.contains("bands") && d["bands"].is_array(), at,
                ": 'bands' must be an array");
        RouteDecision& out = t.decisions_[size_t(info->id)];
        out = RouteDecision{};
        for (const json& b : d["bands"]) {
            require(b.is_object(), at, ": a band must be an object");
            RouteBand band;
            band.kernel = kernel_index(*info, json_string(b, "kernel", at), source);
            const auto last = b.find("last");
            band.last = last == b.end() || last->is_null() ? kRouteUnbounded
                                                            : json_value(b, "last", at);
            out.bands.push_back(band);
        }
        const auto measured = d.find("measurements");
        if (measured != d.end()) {
            require(measured->is_array(), at, ": 'measurements' must be an array");
            for (const json& m : *measured) {
                require(m.is_object() && m.contains("us") && m["us"].is_number(), at,
                        ": a measurement needs 'at', 'kernel' and 'us'");
                out.measurements.push_back({json_value(m, "at", at),
                                            kernel_index(*info, json_string(m, "kernel", at),
                                                         source),
                                            m["us"].get<double>()});
            }
        }
    }
    t.validate();
    return t;
}

RouteTable RouteTable::from_measurements(
    const RouteDevice& device, const std::vector<std::vector<RouteMeasurement>>& by_id) {
    require(int(by_id.size()) == kRouteCount, "route table: measurements for ", kRouteCount,
            " decisions expected, got ", by_id.size());
    RouteTable t = builtin();
    t.device_ = device;
    t.source_ = "tuned";
    for (int i = 0; i < kRouteCount; ++i) {
        const std::vector<RouteMeasurement>& ms = by_id[size_t(i)];
        if (ms.empty()) continue; // not measured: the built-in bands
        std::map<int64_t, const RouteMeasurement*> best; // value -> fastest kernel there
        for (const RouteMeasurement& m : ms) {
            require(m.at >= 1 && m.us > 0.0, "route table: ", route_info(RouteId(i)).name,
                    ": measurement at ", m.at, " of ", m.us, " us");
            const RouteMeasurement*& b = best[m.at];
            if (!b || m.us < b->us) b = &m;
        }
        // The first band starts at 1: values below the first measured one take its winner.
        RouteDecision d;
        d.measurements = ms;
        for (const auto& [at, m] : best) {
            if (!d.bands.empty() && d.bands.back().kernel == m->kernel)
                d.bands.back().last = at;
            else
                d.bands.push_back({at, m->kernel});
        }
        d.bands.back().last = kRouteUnbounded;
        // A kernel may not own values past its domain: the largest measured point it won is
        // in its domain (tune measures inside it), and the band above takes over from there.
        t.decisions_[size_t(i)] = d;
    }
    t.validate();
    return t;
}

void RouteTable::validate() const {
    require(int(decisions_.size()) == kRouteCount, "route table ", source_, ": ", kRouteCount,
            " decisions expected");
    for (int i = 0; i < kRouteCount; ++i) {
        const RouteDecisionInfo& info = route_info(RouteId(i));
        const RouteDecision& d = decisions_[size_t(i)];
        const std::string at = "route table " + source_ + " " + info.name;
        require(!d.bands.empty(), at, ": no bands");
        require(d.bands.back().last == kRouteUnbounded, at,
                ": the last band must be unbounded (no 'last')");
        int64_t first = 1; // the band's first value
        for (size_t b = 0; b < d.bands.size(); ++b) {
            const RouteBand& band = d.bands[b];
            require(band.kernel >= 0 && band.kernel < int(info.kernels.size()), at,
                    ": band ", b, " names no kernel");
            require(band.last >= first, at, ": band ", b, " (to ", band.last,
                    ") does not ascend past ", first - 1);
            const RouteKernel& k = info.kernels[size_t(band.kernel)];
            require(band.last <= k.max, at, ": band ", b, " routes up to ",
                    band.last == kRouteUnbounded ? std::string("any value") : concat(band.last),
                    " to ", k.name, ", whose domain ends at ", k.max);
            if (!d.measurements.empty()) { // a tuned band: its kernel won somewhere in it
                bool won = false;
                for (const RouteMeasurement& m : d.measurements) {
                    if (m.kernel != band.kernel || m.at < first || m.at > band.last) continue;
                    bool fastest = true;
                    for (const RouteMeasurement& o : d.measurements)
                        if (o.at == m.at && o.us < m.us) fastest = false;
                    won = won || fastest;
                }
                require(won, at, ": band ", b, " gives ", k.name,
                        " values where it was never the fastest measured kernel");
            }
            first = band.last == kRouteUnbounded ? band.last : band.last + 1;
        }
    }
}

RouteTable RouteTable::with_bands(RouteId id, const std::vector<RouteBand>& bands) const {
    RouteTable t = *this;
    t.decisions_[size_t(id)] = RouteDecision{bands, {}};
    t.validate();
    return t;
}

RouteTable RouteTable::forcing(RouteId id, int kernel, int64_t value) const {
    const RouteDecisionInfo& info = route_info(id);
    int unbounded = -1;
    for (size_t k = 0; k < info.kernels.size() && unbounded < 0; ++k)
        if (info.kernels[k].max == kRouteUnbounded) unbounded = int(k);
    require(unbounded >= 0, "route table: ", info.name, " has no unbounded kernel");
    require(value >= 1, "route table: ", info.name, ": forcing value ", value, " below 1");
    return with_bands(id, {{value, kernel}, {kRouteUnbounded, unbounded}});
}

int RouteTable::route(RouteId id, int64_t value) const {
    const RouteDecision& d = decisions_[size_t(id)];
    for (const RouteBand& b : d.bands)
        if (value <= b.last) return b.kernel;
    return d.bands.back().kernel; // unreachable: the last band is unbounded
}

int64_t RouteTable::last_value_of(RouteId id, int kernel) const {
    int64_t last = 0;
    for (const RouteBand& b : decisions_[size_t(id)].bands)
        if (b.kernel == kernel) last = b.last;
    return last;
}

std::string RouteTable::to_json() const {
    json j;
    j["device"] = {{"gpu", device_.gpu},
                   {"sm_count", device_.sm_count},
                   {"cuda_version", device_.cuda_version}};
    j["decisions"] = json::object();
    for (int i = 0; i < kRouteCount; ++i) {
        const RouteDecisionInfo& info = route_info(RouteId(i));
        const RouteDecision& d = decisions_[size_t(i)];
        json bands = json::array();
        for (const RouteBand& b : d.bands) {
            json band = {{"kernel", info.kernels[size_t(b.kernel)].name}};
            if (b.last != kRouteUnbounded) band["last"] = b.last;
            bands.push_back(band);
        }
        json dj = {{"domain", info.domain}, {"bands", bands}};
        if (!d.measurements.empty()) {
            json ms = json::array();
            for (const RouteMeasurement& m : d.measurements)
                ms.push_back({{"at", m.at},
                              {"kernel", info.kernels[size_t(m.kernel)].name},
                              {"us", m.us}});
            dj["measurements"] = ms;
        }
        j["decisions"][info.name] = dj;
    }
    return j.dump(1) + "\n";
}

const RouteTable& active_route_table() {
    if (const RouteTable* t = active_pointer().load(std::memory_order_acquire)) return *t;
    static const RouteTable builtin_table = RouteTable::builtin();
    return builtin_table;
}

void set_active_route_table(const RouteTable& table) {
    std::lock_guard<std::mutex> lock(tables_mutex());
    // Every engine sets its table at start-up: the same one again (a process of many engines,
    // the tests) keeps the table in force rather than growing the set.
    const RouteTable* active = active_pointer().load(std::memory_order_acquire);
    if (active && active->source() == table.source() && active->to_json() == table.to_json())
        return;
    tables_set().push_back(std::make_unique<const RouteTable>(table));
    active_pointer().store(tables_set().back().get(), std::memory_order_release);
}

namespace {

RouteTable read_table_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    require(bool(in), "route table ", path, " cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    return RouteTable::parse(text.str(), path);
}

} // namespace

RouteTable resolve_route_table(const std::string& choice, const RouteDevice* device) {
    require(!choice.empty(), "route table: expected auto, builtin or a file");
    if (choice == "builtin") return RouteTable::builtin();
    if (choice == "auto") {
        const std::string dir = route_cache_dir();
        if (!device || dir.empty()) return RouteTable::builtin();
        const std::string path = route_table_file(dir, *device);
        if (!std::filesystem::exists(path)) return RouteTable::builtin();
        RouteTable t = read_table_file(path);
        const RouteDevice& d = t.device();
        require(d.gpu == device->gpu && d.sm_count == device->sm_count &&
                    d.cuda_version == device->cuda_version,
                "route table ", path, " was tuned on ", d.gpu, " (", d.sm_count, " SMs, CUDA ",
                d.cuda_version, "), not this ", device->gpu, " (", device->sm_count,
                " SMs, CUDA ", device->cuda_version, "): run ninfer tune again or remove it");
        return t;
    }
    return read_table_file(choice);
}

std::string route_cache_dir() {
    if (const char* d = std::getenv("NINFER_CACHE_DIR"); d && *d) return d;
    if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/ninfer";
    if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/ninfer";
    return "";
}

std::string route_table_file(const std::string& cache_dir, const RouteDevice& device) {
    std::string gpu = device.gpu.empty() ? "unknown" : device.gpu;
    for (char& c : gpu) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '.' || c == '-' || c == '_';
        if (!ok) c = '_';
    }
    return concat(cache_dir, "/routes/", gpu, "-sm", device.sm_count, "-cuda",
                  device.cuda_version, ".json");
}

} // namespace ninfer::ops
