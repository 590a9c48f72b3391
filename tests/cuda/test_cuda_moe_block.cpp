// moe_block on CUDA against the CPU reference (label cuda): the fused decode route (two kernels:
// route + gate/up, down + combine + shared gate) for T = 1..8 with tied router logits, more
// than 256 experts, every expert chosen, both sides of the decode / composition boundary
// (T * top_k = 63, 64, 65 and 64, 72), unaligned shapes (composition), F32 and BF16, a graph
// capture replaying eager bit for bit, the real 35B-A3B shape at T = 1, and expert parallelism's
// runs of held experts on the fused route, the GEMV composition and the grouped GEMMs; the down
// kernel's opt-in early route giving the same bits.
#include <string>
#include <utility>

#include "cuda/cuda_test_util.h"
#include "cuda/moe_decode_test_util.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

struct Dims {
    int64_t E, k, H, I, Is;
};

std::string describe(const Dims& d, int64_t T) {
    return "T=" + std::to_string(T) + " E=" + std::to_string(d.E) + " k=" + std::to_string(d.k) +
           " H=" + std::to_string(d.H) + " I=" + std::to_string(d.I) +
           " Is=" + std::to_string(d.Is);
}

// Router logits [T, E + 1] whose first E columns are small integers: many exact ties, so the
// lower-id rule decides which experts are chosen. Row 0 is all ties (every p equal).
Tensor tied_logits(int64_t T, int64_t E, uint64_t seed) {
    Tensor l = random_tensor({T, E + 1}, seed, 2.0f);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < E; ++e) {
            float& v = l.ptr<float>()[t * (E + 1) + e];
            v = t == 0 ? 0.5f : std::round(v);
        }
    return l;
}

class CudaMoeBlock : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    ops::ExecContext ctx() const { return cuda_ctx(dt()); }
    const Tolerance& tol() const { return dt() == DType::F32 ? kCudaF32 : kBf16Reduction; }
    Tensor input(std::initializer_list<int64_t> dims, uint64_t seed, float scale = 1.0f) const {
        return rounded(random_tensor(dims, seed, scale), dt());
    }

    // A case's host inputs (seeds from `seed`) and y0 + moe_block(h) on the CPU reference.
    struct Case {
        Tensor h, y0, egu, edown, sgu, sdown, ref;
    };
    Case make_case(int64_t T, const Dims& d, const Tensor& logits, uint64_t seed) const {
        Case k{input({T, d.H}, seed),
               input({T, d.H}, seed + 1),
               input({d.E, 2 * d.I, d.H}, seed + 2, 0.1f),
               input({d.E, d.H, d.I}, seed + 3, 0.1f),
               input({2 * d.Is, d.H}, seed + 4, 0.1f),
               input({d.H, d.Is}, seed + 5, 0.1f),
               {}};
        k.ref = clone(k.y0);
        ops::moe_block(kCpuRef, k.h, logits, d.k, k.egu, k.edown, k.sgu, k.sdown, k.ref);
        return k;
    }

    // y0 + moe_block(h) on CUDA against the CPU reference, for the given logits.
    void check_case(int64_t T, const Dims& d, const Tensor& logits) const {
        const auto c = ctx();
        const Case k = make_case(T, d, logits, 401);
        Tensor y = to_device(c, k.y0, dt());
        ops::moe_block(c, to_device(c, k.h, dt()), to_device(c, logits, DType::F32), d.k,
                       to_device(c, k.egu, dt()), to_device(c, k.edown, dt()),
                       to_device(c, k.sgu, dt()), to_device(c, k.sdown, dt()), y);
        EXPECT_TRUE(near(to_host(c, y), k.ref, tol())) << describe(d, T);
    }
};

// moe_down_kernel's early route (NINFER_MOE_DOWN_EARLY_ROUTE, opt-in): on and with one early id
// wrong (its sabotage arm), the bits of the route without it, with tied logits (the lower-id
// rule decides in both routes) and past 256 experts; the result against the CPU reference.
TEST_P(CudaMoeBlock, EarlyRouteGivesTheSameBits) {
    const auto c = ctx();
    const ScopedEnv early("NINFER_MOE_DOWN_EARLY_ROUTE");
    for (const auto& [T, d] : {std::pair<int64_t, Dims>{1, {256, 8, 256, 64, 64}},
                               {5, {16, 4, 64, 32, 48}},
                               {2, {300, 8, 64, 32, 32}}}) {
        const Tensor logits = tied_logits(T, d.E, 430 + uint64_t(T));
        const Case k = make_case(T, d, logits, 431);
        const Tensor dh = to_device(c, k.h, dt()), dl = to_device(c, logits, DType::F32);
        const Tensor degu = to_device(c, k.egu, dt()), dedown = to_device(c, k.edown, dt());
        const Tensor dsgu = to_device(c, k.sgu, dt()), dsdown = to_device(c, k.sdown, dt());
        auto run = [&](const char* mode) {
            early.set(mode);
            Tensor y = to_device(c, k.y0, dt());
            ops::cuda::moe_block_decode(c, dh, dl, d.k, degu, dedown, dsgu, dsdown, y, 0);
            return to_host(c, y);
        };
        const Tensor plain = run(nullptr);
        EXPECT_TRUE(near(plain, k.ref, tol())) << describe(d, T);
        EXPECT_TRUE(near(run("1"), plain, kExact)) << "early route, " << describe(d, T);
        EXPECT_TRUE(near(run("sabotage"), plain, kExact))
            << "early route, one id wrong, " << describe(d, T);
    }
}

TEST_P(CudaMoeBlock, DecodeRouteWithTiedLogits) {
    const Dims d{16, 4, 64, 32, 48}; // Is != I: the up kernel's idle blocks
    for (int64_t T = 1; T <= 8; ++T) check_case(T, d, tied_logits(T, d.E, 410 + uint64_t(T)));
}

TEST_P(CudaMoeBlock, DecodeRouteEdgeRoutes) {
    check_case(2, {16, 16, 64, 32, 32}, tied_logits(2, 16, 411));  // every expert chosen
    check_case(3, {16, 1, 64, 32, 32}, tied_logits(3, 16, 412));   // top-1
    check_case(2, {300, 8, 64, 32, 32}, tied_logits(2, 300, 413)); // > 256 experts
    check_case(4, {256, 8, 128, 64, 64}, random_tensor({4, 257}, 414, 2.0f));
    check_case(1, {16, 4, 2048, 32, 32}, random_tensor({1, 17}, 415, 2.0f)); // H: 8 load steps
}

TEST_P(CudaMoeBlock, BothSidesOfTheDecodeBoundary) {
    // 64 (token, expert) pairs is the last decode size: 63, 64 at top-1 and 64 at top-8 run the
    // fused kernels, 65 and 72 the composition (moe_route, moe_experts, shared expert, gate).
    for (int64_t T : {63, 64, 65}) check_case(T, {16, 1, 64, 32, 32}, tied_logits(T, 16, 420));
    for (int64_t T : {8, 9}) check_case(T, {16, 8, 64, 32, 32}, tied_logits(T, 16, 421));
}

TEST_P(CudaMoeBlock, UnalignedShapesRunTheComposition) {
    check_case(2, {8, 2, 60, 20, 12}, tied_logits(2, 8, 430)); // H, I, Is not multiples of 8
}

TEST_P(CudaMoeBlock, GraphReplayEqualsEagerBitForBit) {
    const auto base = ctx();
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    const Dims d{16, 8, 128, 64, 32};
    for (int64_t T : {1, 9}) { // the fused route and the composition
        Tensor h = to_device(c, input({T, d.H}, 440), dt()), y0 = input({T, d.H}, 441);
        Tensor logits = to_device(c, tied_logits(T, d.E, 442), DType::F32);
        Tensor egu = to_device(c, input({d.E, 2 * d.I, d.H}, 443, 0.1f), dt());
        Tensor edown = to_device(c, input({d.E, d.H, d.I}, 444, 0.1f), dt());
        Tensor sgu = to_device(c, input({2 * d.Is, d.H}, 445, 0.1f), dt());
        Tensor sdown = to_device(c, input({d.H, d.Is}, 446, 0.1f), dt());
        Tensor y = to_device(c, y0, dt());
        ASSERT_TRUE(ops::moe_block_capturable(c, T, d.k, d.H, d.I));
        expect_replays_equal_eager(
            c, y0, y, [&] { ops::moe_block(c, h, logits, d.k, egu, edown, sgu, sdown, y); },
            "T=" + std::to_string(T));
    }
    ops::synchronize(c);
    ops::bind_device(base);
}

// A dense block's stacks on the host (rounded to dt) and the device, as check_held_runs reads them.
struct DeviceDense {
    Tensor t;
    ops::WeightView view;
    DeviceDense(const ops::ExecContext& c, const Tensor& host, DType dt)
        : t(to_device(c, host, dt)), view(t.view()) {}
};
struct MoeDense {
    Dims d;
    Tensor egu_ref, edown_ref, sgu_ref, sdown_ref;
    DeviceDense d_egu, d_edown, d_sgu, d_sdown;
    MoeDense(const ops::ExecContext& c, const Dims& dims, DType dt, uint64_t seed)
        : d(dims), egu_ref(rounded(random_tensor({d.E, 2 * d.I, d.H}, seed, 0.1f), dt)),
          edown_ref(rounded(random_tensor({d.E, d.H, d.I}, seed + 1, 0.1f), dt)),
          sgu_ref(rounded(random_tensor({2 * d.Is, d.H}, seed + 2, 0.1f), dt)),
          sdown_ref(rounded(random_tensor({d.H, d.Is}, seed + 3, 0.1f), dt)),
          d_egu(c, egu_ref, dt), d_edown(c, edown_ref, dt), d_sgu(c, sgu_ref, dt),
          d_sdown(c, sdown_ref, dt) {}
};

TEST_P(CudaMoeBlock, HeldExpertRunsOnEveryRoute) {
    const auto c = ctx();
    const MoeDense m(c, {16, 4, 64, 32, 48}, dt(), 450);
    check_held_runs(c, m, 2, 451, "fused decode", dt());
    check_held_runs(c, m, 40, 452, "grouped GEMMs", dt()); // 160 pairs
    // Is = 12 (not a multiple of 8): the fused route refuses; 12 pairs take the GEMV kernels.
    const MoeDense gemv(c, {16, 4, 64, 32, 12}, dt(), 453);
    check_held_runs(c, gemv, 3, 454, "GEMV composition", dt());
}

// A row's bits do not depend on the other rows of the call: top-4 at T = 7 and 16, top-16 at
// T = 3 and top-1 at T = 30, row by row against each row alone.
TEST_P(CudaMoeBlock, RowsEqualThemselvesAlone) {
    const auto c = ctx();
    const MoeDense m(c, {16, 4, 64, 32, 48}, dt(), 460);
    for (int64_t T : {7, 16}) check_rows_equal_alone(c, m, T, 461 + uint64_t(T), "top-4", dt());
    const MoeDense k16(c, {16, 16, 64, 32, 32}, dt(), 470);
    check_rows_equal_alone(c, k16, 3, 471, "top-16", dt());
    const MoeDense k1(c, {16, 1, 64, 32, 32}, dt(), 480);
    check_rows_equal_alone(c, k1, 30, 481, "top-1", dt());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMoeBlock, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// Qwen3.6-35B-A3B's MoE block (E = 256, top-8, H = 2048, I = Is = 512) in bf16 at T = 1, the
// decode step's shape. Weights are drawn on the device; the reference runs on host copies.
TEST(CudaMoeBlockReal, Qwen35bDecodeStepAgainstTheReference) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t E = 256, k = 8, H = 2048, I = 512, Is = 512;
    Allocator& a = ops::device_allocator(c.device);
    Tensor egu = Tensor::empty(a, DType::BF16, {E, 2 * I, H});
    Tensor edown = Tensor::empty(a, DType::BF16, {E, H, I});
    Tensor sgu = Tensor::empty(a, DType::BF16, {2 * Is, H}),
           sdown = Tensor::empty(a, DType::BF16, {H, Is});
    ops::fill_random(c, egu, 450, 0.0f, 0.02f);
    ops::fill_random(c, edown, 451, 0.0f, 0.02f);
    ops::fill_random(c, sgu, 452, 0.0f, 0.02f);
    ops::fill_random(c, sdown, 453, 0.0f, 0.02f);
    const Tensor h_egu = to_host(c, egu), h_edown = to_host(c, edown);
    const Tensor h_sgu = to_host(c, sgu), h_sdown = to_host(c, sdown);
    for (uint64_t seed : {454, 455, 456}) {
        Tensor h = rounded(random_tensor({1, H}, seed), DType::BF16);
        Tensor y0 = rounded(random_tensor({1, H}, seed + 10), DType::BF16);
        Tensor logits = random_tensor({1, E + 1}, seed + 20, 2.0f);
        Tensor y = to_device(c, y0, DType::BF16);
        ops::moe_block(c, to_device(c, h, DType::BF16), to_device(c, logits, DType::F32), k, egu,
                       edown, sgu, sdown, y);
        Tensor ref = clone(y0);
        ops::moe_block(kCpuRef, h, logits, k, h_egu, h_edown, h_sgu, h_sdown, ref);
        EXPECT_TRUE(near(to_host(c, y), ref, kBf16Reduction)) << "seed " << seed;
    }
}

} // namespace
} // namespace ninfer::test
