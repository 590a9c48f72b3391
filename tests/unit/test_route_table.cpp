// Route tables (ops/route_table.h): the built-in table gives the boundaries the dispatchers used
// before tables; a file round-trips; every malformed or unsafe table is refused with a message
// naming the problem (the seeds' three failure shapes among them); tables are built from
// measurements; the cache file is keyed by device; `auto` finds it and refuses another device's.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "ops/route_table.h"
#include "runtime/route_selection.h"
#include "runtime/route_tuner.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;
using ops::RouteId;
using ops::RouteMeasurement;
using ops::RouteTable;
using json = nlohmann::json;

constexpr int64_t kMiB = int64_t(1) << 20;

// The GEMV-or-cuBLAS rule linear.cu had before route tables (H200, bench/NOTES.md).
bool old_gemv_preferred(int64_t rows, int64_t weight_bytes) {
    if (rows <= 1) return true;
    if (rows == 2) return weight_bytes <= 16 * kMiB;
    if (rows <= 4) return weight_bytes <= 8 * kMiB;
    return 2 * weight_bytes <= 3 * kMiB;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// A table file's text: the built-in table's JSON with decision `name` replaced by `decision`.
std::string with_decision(const std::string& name, const json& decision) {
    json j = json::parse(RouteTable::builtin().to_json());
    j["decisions"][name] = decision;
    return j.dump();
}

TEST(RouteTable, BuiltinKeepsTheBoundariesOfTheDispatchers) {
    const RouteTable t = RouteTable::builtin();
    EXPECT_FALSE(t.tuned());
    EXPECT_EQ(t.source(), "builtin");
    // linear.bf16.*: exactly the old rule wherever the GEMV fits (1..8 rows).
    for (int64_t rows = 1; rows <= 8; ++rows)
        for (int64_t bytes : {int64_t(1), kMiB, 3 * kMiB / 2, 3 * kMiB / 2 + 1, 4 * kMiB,
                              8 * kMiB, 8 * kMiB + 1, 16 * kMiB, 16 * kMiB + 1, 1024 * kMiB})
            EXPECT_EQ(t.route(ops::linear_bf16_route(bytes), rows) == ops::kRouteGemv,
                      old_gemv_preferred(rows, bytes))
                << rows << " rows, " << bytes << " bytes";
    for (int64_t rows : {9, 16, 4096})
        EXPECT_EQ(t.route(RouteId::LinearBf16Small, rows), 1) << rows;
    // linear.grouped: GEMV passes to 32 rows.
    EXPECT_EQ(t.route(RouteId::LinearGrouped, 32), ops::kRouteGemv);
    EXPECT_EQ(t.route(RouteId::LinearGrouped, 33), 1);
    // gated_delta_rule: the recurrence below 32 rows.
    EXPECT_EQ(t.route(RouteId::GatedDeltaRule, 31), ops::kRouteRecurrent);
    EXPECT_EQ(t.route(RouteId::GatedDeltaRule, 32), ops::kRouteChunked);
    // moe_block: the fused kernels to 64 / 192 / 192 pairs.
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockDense, ops::kRouteFusedDecode), 64);
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockFp8, ops::kRouteFusedDecode), 192);
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockGrouped, ops::kRouteFusedDecode), 192);
    EXPECT_EQ(t.route(RouteId::MoeBlockDense, 65), ops::kRouteComposed);
    // moe_experts.bf16: mma.sync tiles to 32,767 pairs, the wgmma grouped GEMM from 32,768.
    EXPECT_EQ(t.last_value_of(RouteId::MoeExpertsBf16, ops::kRouteMmaSync), 32767);
    EXPECT_EQ(t.route(RouteId::MoeExpertsBf16, 32768), ops::kRouteWgmma);
    // moe_experts.fp8: W8A8 wgmma, operands swapped to 4,096 pairs; attention_prefill.bf16:
    // cuDNN from 512 rows.
    for (int64_t pairs : {1, 193, 1024, 4096})
        EXPECT_EQ(t.route(RouteId::MoeExpertsFp8, pairs), ops::kRouteWgmmaW8a8Swap) << pairs;
    for (int64_t pairs : {4097, 65536})
        EXPECT_EQ(t.route(RouteId::MoeExpertsFp8, pairs), ops::kRouteWgmmaW8a8) << pairs;
    EXPECT_TRUE(ops::route_kernel_available(RouteId::MoeExpertsFp8, ops::kRouteWgmmaW8a8Swap));
    EXPECT_EQ(t.route(RouteId::AttentionPrefillBf16, 511), ops::kRouteFlash);
    EXPECT_EQ(t.route(RouteId::AttentionPrefillBf16, 512), ops::kRouteCudnn);
    // attention_prefill.coded: the same boundary (cuDNN over bf16 staging from 512 rows).
    EXPECT_EQ(t.route(RouteId::AttentionPrefillCoded, 511), ops::kRouteFlash);
    EXPECT_EQ(t.route(RouteId::AttentionPrefillCoded, 512), ops::kRouteCudnn);
    // linear.fp8: GEMV / tensor cores / W8A8 at 8 / 128 rows on smaller weights; GEMV / W8A8 at
    // 4 rows on weights of 16 Mi or more.
    for (auto [rows, kernel] : std::vector<std::pair<int64_t, int>>{
             {8, ops::kRouteGemv}, {9, ops::kRouteTensorCores}, {128, ops::kRouteTensorCores},
             {129, ops::kRouteW8a8}})
        EXPECT_EQ(t.route(RouteId::LinearFp8Small, rows), kernel) << rows;
    EXPECT_EQ(t.route(RouteId::LinearFp8Large, 4), ops::kRouteGemv);
    EXPECT_EQ(t.route(RouteId::LinearFp8Large, 5), ops::kRouteW8a8);
    // Values below 1 count as 1.
    EXPECT_EQ(t.route(RouteId::GatedDeltaRule, 0), ops::kRouteRecurrent);
}

TEST(RouteTable, FileRoundTrips) {
    const json moe = {{"bands", {{{"kernel", "fused_decode"}, {"last", 96}},
                                 {{"kernel", "composed"}}}}};
    std::string text = with_decision("moe_block.fp8", moe);
    json j = json::parse(text);
    j["device"] = {{"gpu", "NVIDIA H100 80GB HBM3"}, {"sm_count", 132}, {"cuda_version", 13000}};
    const RouteTable t = RouteTable::parse(j.dump(), "/x/table.json");
    EXPECT_TRUE(t.tuned());
    EXPECT_EQ(t.source(), "/x/table.json");
    EXPECT_EQ(t.device().gpu, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockFp8, ops::kRouteFusedDecode), 96);
    EXPECT_EQ(t.route(RouteId::MoeBlockFp8, 97), ops::kRouteComposed);
    const RouteTable again = RouteTable::parse(t.to_json(), "again");
    EXPECT_EQ(again.to_json(), t.to_json());
    // A file may name only some decisions: the others keep their built-in bands.
    json partial = {{"device", j["device"]}, {"decisions", {{"moe_block.fp8", moe}}}};
    const RouteTable p = RouteTable::parse(partial.dump(), "partial");
    EXPECT_EQ(p.last_value_of(RouteId::MoeBlockFp8, ops::kRouteFusedDecode), 96);
    EXPECT_EQ(p.last_value_of(RouteId::MoeBlockDense, ops::kRouteFusedDecode), 64);
}

TEST(RouteTable, BadTablesAreClearErrors) {
    auto parse_error = [](const std::string& text) {
        return error_of([&] { RouteTable::parse(text, "t.json"); });
    };
    EXPECT_NE(parse_error("{not json").find("t.json is not JSON"), std::string::npos);
    EXPECT_NE(parse_error("[]").find("a JSON object expected"), std::string::npos);
    EXPECT_NE(parse_error(R"({"decisions": {}})").find("'device'"), std::string::npos);
    const json device = {{"gpu", "G"}, {"sm_count", 1}, {"cuda_version", 1}};
    EXPECT_NE(parse_error(json{{"device", device},
                               {"decisions", {{"linear.fp16", {{"bands", json::array()}}}}}}
                              .dump())
                  .find("unknown decision 'linear.fp16'"),
              std::string::npos);
    auto decision_error = [&](const std::string& name, const json& bands) {
        json j = json::parse(with_decision(name, {{"bands", bands}}));
        j["device"] = device;
        return parse_error(j.dump());
    };
    EXPECT_NE(decision_error("linear.grouped", {{{"kernel", "wgmma"}}}).find("no kernel 'wgmma'"),
              std::string::npos);
    EXPECT_NE(decision_error("linear.grouped", json::array()).find("no bands"), std::string::npos);
    EXPECT_NE(decision_error("gated_delta_rule", {{{"kernel", "recurrent"}, {"last", 40}}})
                  .find("the last band must be unbounded"),
              std::string::npos);
    EXPECT_NE(decision_error("gated_delta_rule", {{{"kernel", "recurrent"}, {"last", 40}},
                                                  {{"kernel", "chunked"}, {"last", 20}},
                                                  {{"kernel", "recurrent"}}})
                  .find("does not ascend"),
              std::string::npos);
    EXPECT_NE(decision_error("gated_delta_rule", {{{"kernel", "chunked"}, {"last", "x"}},
                                                  {{"kernel", "recurrent"}}})
                  .find("'last' must be an integer"),
              std::string::npos);
    // Failure shape 1: a small-T kernel past its domain (the GEMV takes 8 rows at most).
    EXPECT_NE(decision_error("linear.bf16.small", {{{"kernel", "gemv"}, {"last", 16}},
                                                   {{"kernel", "cublas"}}})
                  .find("routes up to 16 to gemv, whose domain ends at 8"),
              std::string::npos);
    EXPECT_NE(decision_error("moe_block.dense", {{{"kernel", "fused_decode"}}})
                  .find("routes up to any value to fused_decode"),
              std::string::npos);
}

TEST(RouteTable, TunedBandsMustHaveWon) {
    // Failure shape 3: a tuned band whose kernel never won a measured point in it.
    const json measured = {{{"at", 1}, {"kernel", "gemv"}, {"us", 3.0}},
                           {{"at", 1}, {"kernel", "cublas"}, {"us", 9.0}},
                           {{"at", 4}, {"kernel", "gemv"}, {"us", 12.0}},
                           {{"at", 4}, {"kernel", "cublas"}, {"us", 10.0}},
                           {{"at", 8}, {"kernel", "gemv"}, {"us", 30.0}},
                           {{"at", 8}, {"kernel", "cublas"}, {"us", 11.0}}};
    auto parse_with = [&](const json& bands) {
        json j = json::parse(with_decision("linear.bf16.medium",
                                           {{"bands", bands}, {"measurements", measured}}));
        j["device"] = {{"gpu", "G"}, {"sm_count", 1}, {"cuda_version", 1}};
        return error_of([&] { RouteTable::parse(j.dump(), "t.json"); });
    };
    EXPECT_EQ(parse_with({{{"kernel", "gemv"}, {"last", 2}}, {{"kernel", "cublas"}}}), "");
    EXPECT_NE(parse_with({{{"kernel", "gemv"}, {"last", 2}},
                          {{"kernel", "cublas"}, {"last", 4}},
                          {{"kernel", "gemv"}, {"last", 8}},
                          {{"kernel", "cublas"}}})
                  .find("band 2 gives gemv values where it was never the fastest"),
              std::string::npos);
}

TEST(RouteTable, FromMeasurements) {
    std::vector<std::vector<RouteMeasurement>> m(ops::kRouteCount);
    auto& lin = m[size_t(RouteId::LinearBf16Huge)];
    // gemv wins at 1 and 2, cuBLAS from 3; only cuBLAS past the GEMV's 8 rows.
    for (auto [at, gemv, cublas] : std::vector<std::tuple<int64_t, double, double>>{
             {1, 10, 14}, {2, 12, 14}, {3, 16, 14}, {4, 19, 15}, {8, 30, 15}})
        lin.push_back({at, 0, gemv}), lin.push_back({at, 1, cublas});
    lin.push_back({16, 1, 17});
    auto& moe = m[size_t(RouteId::MoeBlockGrouped)];
    for (auto [at, fused, composed] : std::vector<std::tuple<int64_t, double, double>>{
             {8, 20, 90}, {64, 60, 95}, {256, 240, 130}})
        moe.push_back({at, 0, fused}), moe.push_back({at, 1, composed});
    moe.push_back({2048, 1, 400}); // past the fused kernels' domain: the composition alone
    const ops::RouteDevice dev{"NVIDIA H200", 132, 13000};
    const RouteTable t = RouteTable::from_measurements(dev, m);
    EXPECT_EQ(t.device().gpu, "NVIDIA H200");
    EXPECT_EQ(t.last_value_of(RouteId::LinearBf16Huge, ops::kRouteGemv), 2);
    EXPECT_EQ(t.route(RouteId::LinearBf16Huge, 3), 1);
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockGrouped, ops::kRouteFusedDecode), 64);
    // Not measured: built in.
    EXPECT_EQ(t.last_value_of(RouteId::MoeBlockDense, ops::kRouteFusedDecode), 64);
    // The file keeps the evidence, and reads back to the same table.
    const RouteTable back = RouteTable::parse(t.to_json(), "back");
    EXPECT_EQ(back.to_json(), t.to_json());
    // Measurements that end on a bounded kernel's win leave it an unbounded band: refused.
    std::vector<std::vector<RouteMeasurement>> short_m(ops::kRouteCount);
    short_m[size_t(RouteId::LinearBf16Small)] = {{1, 0, 1.0}, {1, 1, 2.0}, {8, 0, 3.0},
                                                 {8, 1, 4.0}};
    EXPECT_NE(error_of([&] { RouteTable::from_measurements(dev, short_m); })
                  .find("whose domain ends at 8"),
              std::string::npos);
}

TEST(RouteTable, CacheFilesAreKeyedByDevice) {
    const ops::RouteDevice dev{"NVIDIA H100 80GB HBM3", 132, 13000};
    EXPECT_EQ(ops::route_table_file("/c", dev), "/c/routes/NVIDIA_H100_80GB_HBM3-sm132-cuda13000.json");
    const fs::path dir = scratch_path("ninfer_route_cache");
    fs::remove_all(dir);
    ::setenv("NINFER_CACHE_DIR", dir.c_str(), 1);
    EXPECT_EQ(ops::route_cache_dir(), dir.string());
    // auto: built in without a file, or without a device.
    EXPECT_FALSE(ops::resolve_route_table("auto", &dev).tuned());
    std::vector<std::vector<RouteMeasurement>> m(ops::kRouteCount);
    m[size_t(RouteId::GatedDeltaRule)] = {{1, 0, 2.0}, {1, 1, 9.0}, {16, 0, 20.0},
                                          {16, 1, 12.0}};
    const RouteTable tuned = RouteTable::from_measurements(dev, m);
    const std::string file = ops::route_table_file(dir.string(), dev);
    fs::create_directories(fs::path(file).parent_path());
    std::ofstream(file) << tuned.to_json();
    const RouteTable found = ops::resolve_route_table("auto", &dev);
    EXPECT_EQ(found.source(), file);
    EXPECT_EQ(found.route(RouteId::GatedDeltaRule, 16), ops::kRouteChunked);
    EXPECT_FALSE(ops::resolve_route_table("auto", nullptr).tuned());
    EXPECT_FALSE(ops::resolve_route_table("builtin", &dev).tuned());
    EXPECT_EQ(ops::resolve_route_table(file, nullptr).source(), file);
    // The CPU takes the built-in table with auto; a named file is still read and validated.
    EXPECT_FALSE(runtime::select_route_table("auto", Device::cpu()).tuned());
    EXPECT_TRUE(runtime::select_route_table(file, Device::cpu()).tuned());
    // A file tuned on another device under this device's name (copied by hand): refused.
    const ops::RouteDevice other{"NVIDIA H100 80GB HBM3", 114, 13000};
    const std::string other_file = ops::route_table_file(dir.string(), other);
    fs::copy_file(file, other_file);
    EXPECT_NE(error_of([&] { ops::resolve_route_table("auto", &other); })
                  .find("was tuned on NVIDIA H100 80GB HBM3 (132 SMs"),
              std::string::npos);
    EXPECT_NE(error_of([&] { ops::resolve_route_table((dir / "none.json").string(), nullptr); })
                  .find("cannot be read"),
              std::string::npos);
    ::unsetenv("NINFER_CACHE_DIR");
    fs::remove_all(dir);
}

// ninfer tune forces each kernel at each value it measures (RouteTable::forcing): every one of
// those tables must validate and route the value to the kernel, and each decision's values must
// end past its bounded kernels' domains (from_measurements' last band is then unbounded).
TEST(RouteTable, TuneForcesEveryKernelItMeasures) {
    const RouteTable builtin = RouteTable::builtin();
    for (const ops::RouteDecisionInfo& info : ops::route_catalog())
        for (bool quick : {false, true}) {
            const std::vector<int64_t> values = runtime::tune_values(info.id, quick);
            ASSERT_FALSE(values.empty()) << info.name;
            int64_t bounded = 0;
            for (const ops::RouteKernel& k : info.kernels)
                if (k.max != ops::kRouteUnbounded) bounded = std::max(bounded, k.max);
            EXPECT_GT(values.back(), bounded) << info.name;
            for (size_t i = 0; i < values.size(); ++i) {
                if (i > 0) {
                    EXPECT_GT(values[i], values[i - 1]) << info.name;
                }
                for (int k = 0; k < int(info.kernels.size()); ++k) {
                    if (values[i] > info.kernels[size_t(k)].max) continue;
                    const std::string err = error_of([&] {
                        EXPECT_EQ(builtin.forcing(info.id, k, values[i]).route(info.id, values[i]),
                                  k);
                    });
                    EXPECT_EQ(err, "") << info.name << " " << info.kernels[size_t(k)].name
                                       << " at " << values[i];
                }
            }
        }
}

TEST(RouteTable, ActiveTableIsProcessWide) {
    EXPECT_FALSE(ops::active_route_table().tuned());
    std::vector<std::vector<RouteMeasurement>> m(ops::kRouteCount);
    m[size_t(RouteId::LinearGrouped)] = {{1, 0, 1.0}, {1, 1, 5.0}, {16, 0, 9.0}, {16, 1, 4.0}};
    ops::set_active_route_table(RouteTable::from_measurements({"G", 1, 1}, m));
    EXPECT_EQ(ops::active_route_table().route(RouteId::LinearGrouped, 16), 1);
    ops::set_active_route_table(RouteTable::builtin());
    EXPECT_EQ(ops::active_route_table().route(RouteId::LinearGrouped, 16), ops::kRouteGemv);
}

} // namespace
} // namespace ninfer::test
