#include "runtime/route_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/gated_delta_rule.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/moe.h"
#include "ops/weight.h"

namespace ninfer::runtime {
namespace {

using ops::RouteId;
using ops::RouteMeasurement;

// Bytes written between timed calls to evict the L2 (H100 50 MB, H200 60 MB, B200 126 MB).
constexpr int64_t kFlushBytes = int64_t(256) << 20;

struct Bench {
    ops::ExecContext ctx;
    std::shared_ptr<void> stream;
    Tensor flush;
    const TuneOptions& o;
    DType act = DType::BF16; // activations and dense weights: BF16 on CUDA, F32 on the CPU

    explicit Bench(const TuneOptions& options) : o(options) {
        require(!o.device.is_cpu() || o.shrink > 1,
                "ninfer tune: the route tables are CUDA's; pass --device cuda");
        require(o.reps >= 1 && o.inner >= 1 && o.shrink >= 1 && o.shrink <= 16,
                "ninfer tune: reps and inner must be >= 1, shrink in [1, 16]");
        if (o.device.is_cpu()) {
            ctx = ops::ExecContext::cpu();
            act = DType::F32;
        } else {
            ctx = ops::ExecContext::cuda(o.device.index, DType::BF16);
        }
        stream = ops::create_stream(ctx.device);
        ctx.stream = stream.get();
        ops::bind_device(ctx);
        flush = empty(DType::F32, {kFlushBytes / 4 / o.shrink});
    }
    // A dimension of the real shapes, shrunk (TuneOptions::shrink).
    int64_t dim(int64_t d) const { return std::max<int64_t>(d / o.shrink, 1); }
    // The calling thread goes back to the default stream (as the engine's constructor does),
    // once this stream's work is done: its allocations must not stay ordered on a stream that is
    // about to be destroyed.
    ~Bench() {
        ops::synchronize(ctx);
        ops::ExecContext unbound = ctx;
        unbound.stream = nullptr;
        ops::bind_device(unbound);
    }

    using Dims = std::vector<int64_t>;
    Tensor empty(DType dt, const Dims& dims) {
        return Tensor::empty(ops::device_allocator(ctx.device), dt, dims.data(), int(dims.size()));
    }
    Tensor random(DType dt, const Dims& dims, uint64_t seed, float mean, float stddev) {
        Tensor t = empty(dt, dims);
        ops::fill_random(ctx, t, seed, mean, stddev);
        return t;
    }
    // Host bytes copied into a new device tensor of `dims`.
    Tensor from_host(DType dt, const Dims& dims, void* host) {
        Tensor t = empty(dt, dims);
        ops::upload(ctx,
                    TensorView::contiguous(host, dt, Device::cpu(), dims.data(), int(dims.size())),
                    t);
        return t;
    }
    // Pseudo-random bytes (codes), each passing `valid` (xorshift64).
    Tensor random_bytes(DType dt, const Dims& dims, uint64_t seed, bool (*valid)(uint8_t)) {
        int64_t n = dtype_size(dt);
        for (int64_t d : dims) n *= d;
        std::vector<uint8_t> host(static_cast<size_t>(n));
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
        for (uint8_t& b : host) {
            do {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                b = uint8_t(x >> 24);
            } while (!valid(b));
        }
        return from_host(dt, dims, host.data());
    }
    // F16 scales within +-25% of `value`.
    Tensor f16_scales(const Dims& dims, float value, uint64_t seed) {
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        std::vector<uint16_t> host(static_cast<size_t>(n));
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
        for (uint16_t& h : host) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            h = float_to_f16(value * (0.75f + 0.5f * float(x % 1000) / 1000.0f));
        }
        return from_host(DType::F16, dims, host.data());
    }

    // Microseconds one call of body takes with a cold L2 (route_tuner.h).
    double cold_us(const std::function<void()>& body) {
        body(); // warm-up: allocations, cuBLAS handles and plans
        ops::synchronize(ctx);
        auto timed = [&](bool with_body) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < o.inner; ++i) {
                ops::fill_zero(ctx, flush);
                if (with_body) body();
            }
            ops::synchronize(ctx);
            return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                             t0)
                       .count() /
                   o.inner;
        };
        std::vector<double> us;
        for (int r = 0; r < o.reps; ++r) us.push_back(timed(true) - timed(false));
        std::sort(us.begin(), us.end());
        return std::max(us[us.size() / 2], 0.01); // a positive time: from_measurements' rule
    }

    // Times decision id's kernels at `value` (those whose domain holds it and that can run here:
    // route_kernel_available), each forced by a table that gives it `value`; appends the
    // measurements.
    void measure(RouteId id, int64_t value, const std::function<void()>& body,
                 std::vector<RouteMeasurement>& out) {
        const ops::RouteDecisionInfo& info = ops::route_info(id);
        const ops::RouteTable base = ops::RouteTable::builtin();
        for (int k = 0; k < int(info.kernels.size()); ++k) {
            if (value > info.kernels[size_t(k)].max || !ops::route_kernel_available(id, k))
                continue;
            ops::set_active_route_table(base.forcing(id, k, value));
            out.push_back({value, k, cold_us(body)});
        }
    }

    // Decision id's kernels on y = x w, x [T, K] random rows, at every value T of its grid;
    // appends the measurements to ms and reports them.
    void measure_linear(RouteId id, const ops::WeightView& w, int64_t N, int64_t K, uint64_t seed,
                        std::vector<RouteMeasurement>& ms) {
        for (int64_t T : tune_values(id, o.quick)) {
            const Tensor x = random(act, {T, K}, seed, 0.0f, 1.0f);
            const Tensor y = empty(act, {T, N});
            measure(id, T, [&] { ops::linear(ctx, x, w, y); }, ms);
        }
        report(id, ms);
    }

    void report(RouteId id, const std::vector<RouteMeasurement>& ms) {
        if (!o.progress) return;
        const ops::RouteDecisionInfo& info = ops::route_info(id);
        std::string line = info.name + ":";
        for (const RouteMeasurement& m : ms)
            line += concat(" ", m.at, "/", info.kernels[size_t(m.kernel)].name, "=",
                           int64_t(m.us * 10) / 10.0, "us");
        o.progress(line);
    }
};

void tune_linear_bf16(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
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

int64_t blocks128(int64_t n) {
    return (n + 127) / 128; // fp8 scale blocks of 128
}

bool any_byte(uint8_t) {
    return true;
}
bool not_fp8_nan(uint8_t v) {
    return (v & 0x7F) != 0x7F; // e4m3fn's NaN codes
}

void tune_linear_grouped(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
    constexpr int64_t G = 32;
    const int64_t N = b.dim(4096), K = b.dim(2048);
    const Tensor codes = b.random_bytes(DType::U8, {N, K / 2}, 21, any_byte);
    const Tensor scale = b.f16_scales({N, K / G}, 0.002f, 22);
    const ops::WeightView w = ops::WeightView::grouped(codes.view(), scale.view(), 4, G, K);
    b.measure_linear(RouteId::LinearGrouped, w, N, K, 23, out[size_t(RouteId::LinearGrouped)]);
}

// Block-wise fp8 (128 x 128 F32 scales): one weight under kFp8W8a8LargeWeight elements (the
// 35B's GDN out_proj, 2048 x 4096) and one over (its GDN in_proj, 12352 x 2048).
void tune_linear_fp8(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
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

void tune_gated_delta_rule(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
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

// The 35B's MoE block in one weight format.
struct MoeWeights {
    std::vector<Tensor> keep;
    ops::WeightView egu, edown, sgu, sdown;
};
constexpr int64_t kTopK = 8;

MoeWeights moe_weights(Bench& b, RouteId id) {
    const int64_t kE = std::max<int64_t>(b.dim(256), 2 * kTopK), kH = b.dim(2048),
                  kI = b.dim(512);
    MoeWeights m;
    auto add = [&](Tensor t) {
        m.keep.push_back(std::move(t));
        return m.keep.back().view();
    };
    if (id == RouteId::MoeBlockDense) {
        m.egu = add(b.random(b.act, {kE, 2 * kI, kH}, 41, 0.0f, 0.02f));
        m.edown = add(b.random(b.act, {kE, kH, kI}, 42, 0.0f, 0.02f));
        m.sgu = add(b.random(b.act, {2 * kI, kH}, 43, 0.0f, 0.02f));
        m.sdown = add(b.random(b.act, {kH, kI}, 44, 0.0f, 0.02f));
    } else if (id == RouteId::MoeBlockFp8) {
        auto fp8 = [&](const Bench::Dims& dims, const Bench::Dims& sdims, uint64_t seed) {
            const TensorView q = add(b.random_bytes(DType::F8E4M3, dims, seed, not_fp8_nan));
            const TensorView s = add(b.random(DType::F32, sdims, seed + 1, 1e-3f, 1e-4f));
            return ops::WeightView::fp8(q, s, 128, 128);
        };
        m.egu = fp8({kE, 2 * kI, kH}, {kE, blocks128(2 * kI), blocks128(kH)}, 51);
        m.edown = fp8({kE, kH, kI}, {kE, blocks128(kH), blocks128(kI)}, 53);
        m.sgu = fp8({2 * kI, kH}, {blocks128(2 * kI), blocks128(kH)}, 55);
        m.sdown = fp8({kH, kI}, {blocks128(kH), blocks128(kI)}, 57);
    } else {
        constexpr int64_t G = 32;
        auto q4 = [&](const Bench::Dims& shape, uint64_t seed) {
            Bench::Dims cdims = shape, sdims = shape;
            cdims.back() /= 2;
            sdims.back() /= G;
            const TensorView codes = add(b.random_bytes(DType::U8, cdims, seed, any_byte));
            const TensorView scale = add(b.f16_scales(sdims, 0.002f, seed));
            return ops::WeightView::grouped(codes, scale, 4, G, shape.back());
        };
        m.egu = q4({kE, 2 * kI, kH}, 61);
        m.edown = q4({kE, kH, kI}, 63);
        m.sgu = q4({2 * kI, kH}, 65);
        m.sdown = q4({kH, kI}, 67);
    }
    return m;
}

void tune_moe_block(Bench& b, RouteId id, std::vector<std::vector<RouteMeasurement>>& out) {
    const MoeWeights m = moe_weights(b, id);
    const int64_t kE = m.egu.size(0), kH = m.egu.size(2);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t pairs : tune_values(id, b.o.quick)) {
        const int64_t T = pairs / kTopK;
        const Tensor h = b.random(b.act, {T, kH}, 71, 0.0f, 1.0f);
        const Tensor logits = b.random(DType::F32, {T, kE + 1}, 72, 0.0f, 2.0f);
        const Tensor y = b.random(b.act, {T, kH}, 73, 0.0f, 1.0f);
        b.measure(id, pairs, [&] {
            ops::moe_block(b.ctx, h, logits, kTopK, m.egu, m.edown, m.sgu, m.sdown, y);
        }, ms);
    }
    b.report(id, ms);
}

// moe_experts' grouped route on bf16 stacks of the 35B's shapes (E = 256, H = 2048, I = 512):
// the mma.sync tiles against the wgmma grouped GEMM, from a few rows per expert to a prefill chunk.
void tune_moe_experts(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
    const RouteId id = RouteId::MoeExpertsBf16;
    const MoeWeights m = moe_weights(b, RouteId::MoeBlockDense); // the bf16 stacks
    const TensorView gu = m.egu.w, down = m.edown.w;
    const int64_t kE = gu.size(0), kH = gu.size(2);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t pairs : tune_values(id, b.o.quick)) {
        const int64_t T = pairs / kTopK;
        const Tensor x = b.random(b.act, {T, kH}, 83, 0.0f, 1.0f);
        const Tensor logits = b.random(DType::F32, {T, kE}, 84, 0.0f, 2.0f);
        const Tensor w = b.empty(DType::F32, {T, kTopK}), ids = b.empty(DType::I32, {T, kTopK});
        ops::moe_route(b.ctx, logits, kTopK, w, ids);
        const Tensor y = b.random(b.act, {T, kH}, 85, 0.0f, 1.0f);
        b.measure(id, pairs, [&] { ops::moe_experts(b.ctx, x, gu, down, ids, w, y); }, ms);
    }
    b.report(id, ms);
}

// moe_experts' grouped route on block-wise fp8 stacks of the 35B's shapes, through moe_block
// (past its fused decode kernels the composition runs the grouped route): the mma.sync tiles on
// bf16 activations against the W8A8 wgmma grouped GEMM.
void tune_moe_experts_fp8(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
    const RouteId id = RouteId::MoeExpertsFp8;
    const MoeWeights m = moe_weights(b, RouteId::MoeBlockFp8);
    const int64_t kE = m.egu.size(0), kH = m.egu.size(2);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t pairs : tune_values(id, b.o.quick)) {
        const int64_t T = pairs / kTopK;
        const Tensor h = b.random(b.act, {T, kH}, 86, 0.0f, 1.0f);
        const Tensor logits = b.random(DType::F32, {T, kE + 1}, 87, 0.0f, 2.0f);
        const Tensor y = b.random(b.act, {T, kH}, 88, 0.0f, 1.0f);
        b.measure(id, pairs, [&] {
            ops::moe_block(b.ctx, h, logits, kTopK, m.egu, m.edown, m.sgu, m.sdown, y);
        }, ms);
    }
    b.report(id, ms);
}

// paged_attention's prefill route on one fresh prompt of T rows, the 35B's heads (16 query, 2
// KV, head dim 256) over bf16 planes of 16-token blocks: the flash kernel against cuDNN's fused
// attention (where libcudnn loads). On the CPU, shrunk, the prompt is T / shrink rows.
void tune_attention_prefill(Bench& b, std::vector<std::vector<RouteMeasurement>>& out) {
    const RouteId id = RouteId::AttentionPrefillBf16;
    constexpr int32_t kBlock = 16;
    const int64_t nH = b.dim(16), nKV = std::max<int64_t>(b.dim(2), 1), D = b.dim(256);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t value : tune_values(id, b.o.quick)) {
        const int32_t T = int32_t(b.o.shrink > 1 ? std::max<int64_t>(value / b.o.shrink, 16)
                                                 : value);
        const int32_t blocks = (T + kBlock - 1) / kBlock;
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        for (int32_t i = 0; i < blocks; ++i) table[size_t(i)] = i;
        int32_t rows[2] = {0, T}, zero[1] = {0};
        const Tensor d_rows = b.from_host(DType::I32, {2}, rows);
        const Tensor d_zero = b.from_host(DType::I32, {1}, zero);
        const Tensor d_table = b.from_host(DType::I32, {1, blocks}, table.data());
        ops::SeqBatch batch;
        batch.num_seqs = 1;
        batch.num_rows = batch.max_rows_per_seq = batch.max_context = T;
        batch.host_row_begin = rows;
        batch.host_pos_begin = batch.host_state_slot = zero;
        batch.host_block_table = table.data();
        batch.block_table_stride = blocks;
        batch.block_size = kBlock;
        batch.row_begin = d_rows.view();
        batch.pos_begin = batch.state_slot = d_zero.view();
        batch.block_table = d_table.view();
        const Tensor q = b.random(b.act, {T, nH, D}, 91, 0.0f, 1.0f);
        const Tensor kc = b.random(b.act, {blocks, kBlock, nKV, D}, 92, 0.0f, 1.0f);
        const Tensor vc = b.random(b.act, {blocks, kBlock, nKV, D}, 93, 0.0f, 1.0f);
        const Tensor o = b.empty(b.act, {T, nH, D});
        const float scale = 1.0f / std::sqrt(float(D));
        b.measure(id, value, [&] {
            ops::paged_attention(b.ctx, q, kc.view(), vc.view(), batch, scale, o);
        }, ms);
    }
    b.report(id, ms);
}

} // namespace

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
                     : std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384, 65536};
    case RouteId::AttentionPrefillBf16: // rows of one prompt, from the flash route's first
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
        Bench b(options);
        tune_linear_bf16(b, out);
        tune_linear_grouped(b, out);
        tune_linear_fp8(b, out);
        tune_gated_delta_rule(b, out);
        for (RouteId id : {RouteId::MoeBlockDense, RouteId::MoeBlockFp8, RouteId::MoeBlockGrouped})
            tune_moe_block(b, id, out);
        tune_moe_experts(b, out);
        tune_attention_prefill(b, out);
        tune_moe_experts_fp8(b, out);
    } catch (...) {
        ops::set_active_route_table(before);
        throw;
    }
    ops::set_active_route_table(before);
    return out;
}

} // namespace ninfer::runtime
