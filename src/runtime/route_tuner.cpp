// `ninfer tune` (route_tuner.h): the linear and gated-delta-rule decisions, each decision's
// value grid, and the driver that measures them all (the prefill-side decisions are in
// route_tuner_moe.cpp, the harness in route_tuner_bench.h).
#include "runtime/route_tuner.h"

#include <cstring>

#include "ops/gated_delta_rule.h"
#include "ops/linear.h"
#include "runtime/route_tuner_bench.h"

namespace ninfer::runtime {
namespace tuning {
namespace {

void tune_linear_bf16(Bench& b, Measurements& out) {
    struct Shape {
        RouteId id;
        int64_t N, K;
    };
    for (const Shape& s : {Shape{RouteId::LinearBf16Small, 257, 2048},
                           Shape{RouteId::LinearBf16Medium, 1024, 2048},
                           Shape{RouteId::LinearBf16Large, 2048, 4096},
                           Shape{RouteId::LinearBf16Huge, 12352, 2048}}) {
        require(b.o.shrink > 1 || ops::linear_bf16_route(s.N * s.K * 2) == s.id,
                "ninfer tune: the shape of ", ops::route_info(s.id).name,
                " is in another class");
        const int64_t N = b.dim(s.N), K = b.dim(s.K);
        const Tensor w = b.random(b.act, {N, K}, 11, 0.0f, 0.02f);
        b.measure_linear(s.id, w.view(), N, K, 12, out[size_t(s.id)]);
    }
}

void tune_linear_grouped(Bench& b, Measurements& out) {
    constexpr int64_t G = 32;
    const int64_t N = b.dim(4096), K = b.dim(2048);
    const Tensor codes = b.random_bytes(DType::U8, {N, K / 2}, 21, any_byte);
    const Tensor scale = b.f16_scales({N, K / G}, 0.002f, 22);
    const ops::WeightView w = ops::WeightView::grouped(codes.view(), scale.view(), 4, G, K);
    b.measure_linear(RouteId::LinearGrouped, w, N, K, 23, out[size_t(RouteId::LinearGrouped)]);
}

// Block-wise fp8 (128 x 128 F32 scales): one weight under kFp8W8a8LargeWeight elements (the
// 35B's GDN out_proj, 2048 x 4096) and one over (its GDN in_proj, 12352 x 2048).
void tune_linear_fp8(Bench& b, Measurements& out) {
    struct Shape {
        RouteId id;
        int64_t N, K;
    };
    for (const Shape& s : {Shape{RouteId::LinearFp8Small, 2048, 4096},
                           Shape{RouteId::LinearFp8Large, 12352, 2048}}) {
        const int64_t N = b.dim(s.N), K = b.dim(s.K);
        const Tensor codes = b.random_bytes(DType::F8E4M3, {N, K}, 81, not_fp8_nan);
        const Tensor scale =
            b.random(DType::F32, {blocks128(N), blocks128(K)}, 82, 1e-3f, 1e-4f);
        const ops::WeightView w = ops::WeightView::fp8(codes.view(), scale.view(), 128, 128);
        b.measure_linear(s.id, w, N, K, 83, out[size_t(s.id)]);
    }
}

void tune_gated_delta_rule(Bench& b, Measurements& out) {
    constexpr int64_t Hv = 32, Hk = 16;
    const int64_t D = b.dim(128);
    const Tensor state = b.random(DType::F32, {1, Hv, D, D}, 31, 0.0f, 0.01f);
    std::vector<RouteMeasurement>& ms = out[size_t(RouteId::GatedDeltaRule)];
    for (int64_t T : tune_values(RouteId::GatedDeltaRule, b.o.quick)) {
        const Tensor q = b.random(b.act, {T, Hk, D}, 32, 0.0f, 1.0f);
        const Tensor k = b.random(b.act, {T, Hk, D}, 33, 0.0f, 1.0f);
        const Tensor v = b.random(b.act, {T, Hv, D}, 34, 0.0f, 1.0f);
        const Tensor g = b.random(DType::F32, {T, Hv}, 35, -0.1f, 0.02f);
        const Tensor beta = b.random(DType::F32, {T, Hv}, 36, 0.5f, 0.1f);
        const Tensor o = b.empty(b.act, {T, Hv, D});
        int32_t rows[2] = {0, int32_t(T)}, zero[1] = {0};
        const Tensor d_rows = b.from_host(DType::I32, {2}, rows);
        const Tensor d_zero = b.from_host(DType::I32, {1}, zero);
        ops::SeqBatch batch;
        batch.num_seqs = 1;
        batch.num_rows = batch.max_rows_per_seq = batch.max_context = int32_t(T);
        batch.host_row_begin = rows;
        batch.host_pos_begin = batch.host_state_slot = zero;
        batch.row_begin = d_rows.view();
        batch.pos_begin = batch.state_slot = d_zero.view();
        // The route is forced through GdnAlgo, as gated_delta_rule's own tests do; the table's
        // decision is what Auto then consults.
        for (int kernel : {ops::kRouteRecurrent, ops::kRouteChunked}) {
            const ops::GdnAlgo algo =
                kernel == ops::kRouteChunked ? ops::GdnAlgo::Chunked : ops::GdnAlgo::Recurrent;
            ms.push_back({T, kernel, b.cold_us([&] {
                              ops::gated_delta_rule(b.ctx, q, k, v, g, beta, batch, state, o,
                                                    algo);
                          })});
        }
    }
    b.report(RouteId::GatedDeltaRule, ms);
}

} // namespace
} // namespace tuning

using ops::RouteId;
using ops::RouteMeasurement;

std::vector<int64_t> tune_values(RouteId id, bool quick) {
    switch (id) {
    case RouteId::LinearBf16Small:
    case RouteId::LinearBf16Medium:
    case RouteId::LinearBf16Large:
    case RouteId::LinearBf16Huge:
        return quick ? std::vector<int64_t>{1, 2, 8, 16}
                     : std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16};
    case RouteId::LinearGrouped:
        return quick ? std::vector<int64_t>{1, 8, 64, 128}
                     : std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128};
    case RouteId::LinearFp8Small:
    case RouteId::LinearFp8Large:
        return quick ? std::vector<int64_t>{1, 4, 16, 128, 256}
                     : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64, 96, 128, 192, 256};
    case RouteId::GatedDeltaRule:
        return quick ? std::vector<int64_t>{1, 16, 64, 128}
                     : std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 128};
    case RouteId::MoeBlockDense:
    case RouteId::MoeBlockFp8:
    case RouteId::MoeBlockGrouped: // tokens x top-8
        return quick ? std::vector<int64_t>{8, 64, 1280}
                     : std::vector<int64_t>{8, 16, 32, 64, 128, 192, 256, 512, 1024, 1280};
    case RouteId::MoeExpertsBf16: // tokens x top-8, past the fused decode kernels
        return quick ? std::vector<int64_t>{512, 16384, 65536}
                     : std::vector<int64_t>{128, 512, 1024, 2048, 4096, 8192, 16384, 65536};
    case RouteId::MoeExpertsFp8: // tokens x top-8, past the fused decode kernels
        return quick ? std::vector<int64_t>{512, 16384, 65536}
                     : std::vector<int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384, 65536};
    case RouteId::AttentionPrefillBf16: // rows of one prompt, from the flash route's first
    case RouteId::AttentionPrefillCoded:
        return quick ? std::vector<int64_t>{64, 1024, 8192}
                     : std::vector<int64_t>{16, 64, 256, 512, 1024, 2048, 4096, 8192};
    case RouteId::Count: break;
    }
    fail_invalid("ninfer tune: no decision ", int(id));
}

std::vector<std::vector<RouteMeasurement>> measure_routes(const TuneOptions& options) {
    const ops::RouteTable before = ops::active_route_table();
    std::vector<std::vector<RouteMeasurement>> out(ops::kRouteCount);
    try {
        tuning::Bench b(options);
        tuning::tune_linear_bf16(b, out);
        tuning::tune_linear_grouped(b, out);
        tuning::tune_linear_fp8(b, out);
        tuning::tune_gated_delta_rule(b, out);
        for (RouteId id : {RouteId::MoeBlockDense, RouteId::MoeBlockFp8, RouteId::MoeBlockGrouped})
            tuning::tune_moe_block(b, id, out);
        tuning::tune_moe_experts(b, out);
        tuning::tune_attention_prefill(b, ops::KvDtype::Activation, out);
        tuning::tune_attention_prefill(b, ops::KvDtype::Int8, out);
        tuning::tune_moe_experts_fp8(b, out);
    } catch (...) {
        ops::set_active_route_table(before);
        throw;
    }
    ops::set_active_route_table(before);
    return out;
}

} // namespace ninfer::runtime
