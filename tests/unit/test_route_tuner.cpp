// ninfer tune's harness (runtime/route_tuner.h) end to end on the CPU at shapes shrunk 16-fold:
// every decision is measured at its values (each kernel forced by a table in force), the
// measurements make a table that validates and round-trips, and the table in force before is
// restored. The CPU has no routes, so the times say nothing; the shapes, the tensors each op is
// given and the bookkeeping are what this checks before a GPU spends minutes on them.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/route_table.h"
#include "runtime/route_tuner.h"

namespace ninfer::test {
namespace {

TEST(RouteTuner, QuickTuneOnShrunkShapesMakesAValidTable) {
    runtime::TuneOptions o;
    o.device = Device::cpu();
    o.quick = true;
    o.reps = 1;
    o.inner = 1;
    o.shrink = 16;
    int lines = 0;
    o.progress = [&](const std::string&) { ++lines; };
    const auto measured = runtime::measure_routes(o);
    ASSERT_EQ(int(measured.size()), ops::kRouteCount);
    EXPECT_EQ(lines, ops::kRouteCount);
    for (const ops::RouteDecisionInfo& info : ops::route_catalog()) {
        const auto& ms = measured[size_t(info.id)];
        const std::vector<int64_t> values = runtime::tune_values(info.id, true);
        size_t expected = 0; // one per kernel whose domain holds the value and that can run
        for (int64_t v : values)
            for (size_t k = 0; k < info.kernels.size(); ++k)
                expected += v <= info.kernels[k].max &&
                            ops::route_kernel_available(info.id, int(k));
        EXPECT_EQ(ms.size(), expected) << info.name;
        for (const ops::RouteMeasurement& m : ms) EXPECT_GT(m.us, 0.0) << info.name;
    }
    EXPECT_FALSE(ops::active_route_table().tuned()); // restored
    const ops::RouteTable t = ops::RouteTable::from_measurements({"cpu", 1, 0}, measured);
    EXPECT_EQ(ops::RouteTable::parse(t.to_json(), "back").to_json(), t.to_json());
}

TEST(RouteTuner, RefusesTheCpuAtRealShapes) {
    runtime::TuneOptions o;
    o.device = Device::cpu();
    try {
        runtime::measure_routes(o);
        FAIL() << "tuned the CPU";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pass --device cuda"), std::string::npos);
    }
}

} // namespace
} // namespace ninfer::test
