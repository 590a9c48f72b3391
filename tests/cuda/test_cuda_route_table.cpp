// Route tables on CUDA (ops/route_table.h, runtime/route_tuner.h; label cuda): a table put in
// force moves the dispatchers' boundaries (the GEMV-or-cuBLAS rule, the fused MoE decode route's
// pairs), the built-in one restores them, and `ninfer tune`'s measurements (quick, one timing
// each) cover every decision and make a table that validates and round-trips.
#include <string>

#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/route_table.h"
#include "runtime/route_selection.h"
#include "runtime/route_tuner.h"

namespace ninfer::test {
namespace {

using ops::RouteId;

// Restores the built-in table when a test ends, whatever it put in force.
struct BuiltinAfter {
    ~BuiltinAfter() { ops::set_active_route_table(ops::RouteTable::builtin()); }
};

TEST(CudaRouteTable, AnActiveTableMovesTheBoundaries) {
    BuiltinAfter restore;
    constexpr int64_t kMiB = int64_t(1) << 20;
    EXPECT_TRUE(ops::cuda::gemv_preferred(4, 4 * kMiB));
    const ops::RouteTable builtin = ops::RouteTable::builtin();
    ops::set_active_route_table(
        builtin.with_bands(RouteId::LinearBf16Medium, {{2, ops::kRouteGemv}, {ops::kRouteUnbounded, 1}}));
    EXPECT_FALSE(ops::cuda::gemv_preferred(4, 4 * kMiB));
    EXPECT_TRUE(ops::cuda::gemv_preferred(2, 4 * kMiB));

    // The fused MoE decode route: 2 tokens x top-8 = 16 pairs, then a table that stops it at 8.
    const auto c = cuda_ctx(DType::BF16);
    const int64_t E = 16, k = 8, H = 256, I = 128;
    const Tensor h = to_device(c, random_tensor({2, H}, 1), DType::BF16);
    const Tensor egu = to_device(c, random_tensor({E, 2 * I, H}, 2, 0.05f), DType::BF16);
    const Tensor edown = to_device(c, random_tensor({E, H, I}, 3, 0.05f), DType::BF16);
    const Tensor sgu = to_device(c, random_tensor({2 * I, H}, 4, 0.05f), DType::BF16);
    const Tensor sdown = to_device(c, random_tensor({H, I}, 5, 0.05f), DType::BF16);
    const TensorView logits = TensorView::contiguous(nullptr, DType::F32, h.view().device, {2, E + 1});
    auto fits = [&] {
        return ops::cuda::moe_block_decode_fits(h, logits, k, egu, edown, sgu, sdown);
    };
    ops::set_active_route_table(builtin);
    EXPECT_TRUE(fits());
    ops::set_active_route_table(builtin.with_bands(
        RouteId::MoeBlockDense, {{8, ops::kRouteFusedDecode}, {ops::kRouteUnbounded, 1}}));
    EXPECT_FALSE(fits());
}

TEST(CudaRouteTable, QuickTuneMakesAValidTable) {
    BuiltinAfter restore;
    runtime::TuneOptions o;
    o.quick = true;
    o.reps = 1;
    o.inner = 1;
    const auto measured = runtime::measure_routes(o);
    ASSERT_EQ(int(measured.size()), ops::kRouteCount);
    for (int i = 0; i < ops::kRouteCount; ++i) {
        const auto& ms = measured[size_t(i)];
        EXPECT_FALSE(ms.empty()) << ops::route_info(RouteId(i)).name;
        for (const ops::RouteMeasurement& m : ms) EXPECT_GT(m.us, 0.0);
    }
    EXPECT_FALSE(ops::active_route_table().tuned()); // measure_routes restored the table
    const ops::RouteTable t =
        ops::RouteTable::from_measurements(runtime::route_device(Device::cuda(0)), measured);
    const ops::RouteTable back = ops::RouteTable::parse(t.to_json(), "back");
    EXPECT_EQ(back.to_json(), t.to_json());
    std::printf("%s", t.to_json().c_str());
}

} // namespace
} // namespace ninfer::test
