// ops/moe.h: moe_route, moe_experts and add_sigmoid_scaled, Fast against Reference and by hand.
#include <random>

#include "ops/moe.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// ---------------------------------------------------------------------------------------------
// moe_route

void route(const ops::ExecContext& ctx, const Tensor& logits, int64_t top_k, Tensor& weights,
           Tensor& ids) {
    weights = zeros({logits.size(0), top_k});
    ids = zeros({logits.size(0), top_k}, DType::I32);
    ops::moe_route(ctx, logits, top_k, weights, ids);
}

TEST(MoeRoute, FastMatchesReferenceAcrossShapes) {
    for (int64_t E : {8, 64, 256}) {
        for (int64_t top_k : {1, 2, 8}) {
            for (int64_t T : {1, 3, 17, 150}) {
                Tensor logits = random_tensor({T, E}, 300 + uint64_t(E + T), 2.0f);
                Tensor w_ref, id_ref, w_fast, id_fast;
                route(kRef, logits, top_k, w_ref, id_ref);
                route(kFast, logits, top_k, w_fast, id_fast);
                EXPECT_TRUE(near(id_fast, id_ref, kExact))
                    << "E=" << E << " k=" << top_k << " T=" << T;
                EXPECT_TRUE(near(w_fast, w_ref, kElementwiseF32))
                    << "E=" << E << " k=" << top_k << " T=" << T;
            }
        }
    }
}

TEST(MoeRoute, ReferenceMatchesSoftmaxTopKRenormalised) {
    const int64_t T = 20, E = 32, top_k = 4;
    Tensor logits = random_tensor({T, E}, 310, 2.0f);
    Tensor w, ids;
    route(kRef, logits, top_k, w, ids);
    for (int64_t t = 0; t < T; ++t) {
        const float* l = logits.ptr<float>() + t * E;
        // Brute force: the ids sorted by logit (softmax is monotone), ties to the lower id.
        std::vector<int32_t> order(static_cast<size_t>(E), 0);
        for (int32_t e = 0; e < E; ++e) order[size_t(e)] = e;
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return l[a] > l[b]; });
        double top = 0;
        for (int64_t j = 0; j < top_k; ++j) top += std::exp(double(l[order[size_t(j)]]));
        for (int64_t j = 0; j < top_k; ++j) {
            EXPECT_EQ(ids.ptr<int32_t>()[t * top_k + j], order[size_t(j)])
                << "t=" << t << " j=" << j;
            EXPECT_NEAR(w.ptr<float>()[t * top_k + j], std::exp(double(l[order[size_t(j)]])) / top,
                        1e-6);
        }
    }
}

TEST(MoeRoute, TiesPickTheLowerExpertAndWeightsRenormalise) {
    // p = softmax([ln 4, ln 2, ln 1, ln 1, ln 2]) = [4, 2, 1, 1, 2] / 10.
    const float l2 = std::log(2.0f), l4 = std::log(4.0f);
    Tensor logits = f32_tensor({2, 5}, {l4, l2, 0.0f, 0.0f, l2, 3.0f, 3.0f, 3.0f, 1.0f, 3.0f});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor w, ids;
        route(ctx, logits, 2, w, ids); // row 0: 4/10 then the tie 2/10 (ids 1 and 4) -> id 1
        EXPECT_EQ(ids.ptr<int32_t>()[0], 0);
        EXPECT_EQ(ids.ptr<int32_t>()[1], 1);
        EXPECT_NEAR(w.ptr<float>()[0], 2.0 / 3.0, 1e-6);
        EXPECT_NEAR(w.ptr<float>()[1], 1.0 / 3.0, 1e-6);
        EXPECT_EQ(ids.ptr<int32_t>()[2], 0); // row 1: four-way tie -> ids 0, 1
        EXPECT_EQ(ids.ptr<int32_t>()[3], 1);
        EXPECT_NEAR(w.ptr<float>()[2], 0.5, 1e-6);
        route(ctx, logits, 4, w, ids); // row 0: [0, 1, 4, 2] with weights 4, 2, 2, 1 over 9
        EXPECT_EQ(floats(rows(ids, 0, 1)), (std::vector<float>{0, 1, 4, 2}));
        EXPECT_NEAR(w.ptr<float>()[0], 4.0 / 9.0, 1e-6);
        EXPECT_NEAR(w.ptr<float>()[3], 1.0 / 9.0, 1e-6);
        EXPECT_EQ(floats(rows(ids, 1, 1)), (std::vector<float>{0, 1, 2, 4}));
        route(ctx, logits, 5, w, ids); // all experts: the full softmax
        EXPECT_NEAR(w.ptr<float>()[0], 0.4, 1e-6);
        EXPECT_NEAR(w.ptr<float>()[4], 0.1, 1e-6);
    }
}

TEST(MoeRoute, RejectsBadArguments) {
    Tensor logits = random_tensor({3, 8}, 320);
    Tensor w = zeros({3, 2}), ids = zeros({3, 2}, DType::I32);
    EXPECT_THROW(ops::moe_route(kFast, logits, 0, w, ids), Error);
    Tensor w9 = zeros({3, 9}), ids9 = zeros({3, 9}, DType::I32);
    EXPECT_THROW(ops::moe_route(kFast, logits, 9, w9, ids9), Error);
    EXPECT_THROW(ops::moe_route(kFast, logits, 3, w, ids), Error); // outputs hold 2
    Tensor ids_f = zeros({3, 2});
    EXPECT_THROW(ops::moe_route(kFast, logits, 2, w, ids_f), Error);
    Tensor logits_int = zeros({3, 8}, DType::I32);
    EXPECT_THROW(ops::moe_route(kFast, logits_int, 2, w, ids), Error);
}

// ---------------------------------------------------------------------------------------------
// moe_experts

struct Experts {
    Tensor gate_up, down; // [E, 2I, H], [E, H, I]
};

Experts make_experts(int64_t E, int64_t H, int64_t I, uint64_t seed) {
    return {random_tensor({E, 2 * I, H}, seed, 1.0f / std::sqrt(float(H))),
            random_tensor({E, H, I}, seed + 1, 1.0f / std::sqrt(float(I)))};
}

// Routes random logits (so ids are distinct per token and weights realistic).
void random_routing(int64_t T, int64_t E, int64_t top_k, uint64_t seed, Tensor& w, Tensor& ids) {
    Tensor logits = random_tensor({T, E}, seed, 2.0f);
    route(kRef, logits, top_k, w, ids);
}

TEST(MoeExperts, FastMatchesReferenceAcrossShapes) {
    struct Dims {
        int64_t E, H, I, top_k;
    };
    for (Dims d :
         {Dims{8, 64, 32, 1}, Dims{8, 256, 128, 2}, Dims{16, 128, 64, 4}, Dims{4, 32, 16, 4}}) {
        Experts ex = make_experts(d.E, d.H, d.I, 330 + uint64_t(d.H));
        for (int64_t T : {1, 3, 17, 65}) {
            Tensor x = random_tensor({T, d.H}, 331 + uint64_t(T));
            Tensor w, ids;
            random_routing(T, d.E, d.top_k, 332 + uint64_t(T), w, ids);
            Tensor y0 = random_tensor({T, d.H}, 333); // accumulates into the residual
            Tensor ref = clone(y0), fast = clone(y0);
            ops::moe_experts(kRef, x, ex.gate_up, ex.down, ids, w, ref);
            ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, fast);
            EXPECT_TRUE(near(fast, ref, kReductionF32))
                << "E=" << d.E << " H=" << d.H << " I=" << d.I << " k=" << d.top_k << " T=" << T;
        }
    }
}

TEST(MoeExperts, ReferenceMatchesNaiveSwiGluExperts) {
    const int64_t T = 5, E = 6, H = 12, I = 7, K = 3;
    Experts ex = make_experts(E, H, I, 340);
    Tensor x = random_tensor({T, H}, 341), w, ids;
    random_routing(T, E, K, 342, w, ids);
    ids.ptr<int32_t>()[0] = 5; // a repeated expert within one token is summed twice
    ids.ptr<int32_t>()[1] = 5;
    Tensor y = random_tensor({T, H}, 343), expect = clone(y);
    ops::moe_experts(kRef, x, ex.gate_up, ex.down, ids, w, y);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> sum(static_cast<size_t>(H), 0.0);
        for (int64_t j = 0; j < K; ++j) {
            const int64_t e = ids.ptr<int32_t>()[t * K + j];
            std::vector<double> act(static_cast<size_t>(I), 0.0);
            for (int64_t i = 0; i < I; ++i) {
                double g = 0, u = 0; // rows [0, I) gate, [I, 2I) up
                for (int64_t c = 0; c < H; ++c) {
                    g += double(ex.gate_up.ptr<float>()[(e * 2 * I + i) * H + c]) *
                         x.ptr<float>()[t * H + c];
                    u += double(ex.gate_up.ptr<float>()[(e * 2 * I + I + i) * H + c]) *
                         x.ptr<float>()[t * H + c];
                }
                act[size_t(i)] = silu(g) * u;
            }
            for (int64_t c = 0; c < H; ++c) {
                double o = 0;
                for (int64_t i = 0; i < I; ++i)
                    o += double(ex.down.ptr<float>()[(e * H + c) * I + i]) * act[size_t(i)];
                sum[size_t(c)] += double(w.ptr<float>()[t * K + j]) * o;
            }
        }
        for (int64_t c = 0; c < H; ++c)
            expect.ptr<float>()[t * H + c] = float(expect.ptr<float>()[t * H + c] + sum[size_t(c)]);
    }
    EXPECT_TRUE(near(y, expect, kElementwiseF32));    // FP64 both sides, one f32 rounding
    Tensor fast = zeros({T, H}), ref = zeros({T, H}); // Fast on the repeated-expert routing
    ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, fast);
    ops::moe_experts(kRef, x, ex.gate_up, ex.down, ids, w, ref);
    EXPECT_TRUE(near(fast, ref, kReductionF32));
}

TEST(MoeExperts, ZeroWeightContributesNothing) {
    const int64_t T = 4, E = 4, H = 16, I = 8;
    Experts ex = make_experts(E, H, I, 350);
    Tensor x = random_tensor({T, H}, 351);
    Tensor ids = zeros({T, 2}, DType::I32), w = zeros({T, 2});
    for (int64_t t = 0; t < T; ++t) {
        ids.ptr<int32_t>()[t * 2] = int32_t(t);
        ids.ptr<int32_t>()[t * 2 + 1] = int32_t((t + 1) % E);
        w.ptr<float>()[t * 2] = 1.0f; // second slot weight 0
    }
    Tensor ids_one = zeros({T, 1}, DType::I32), w_one = zeros({T, 1});
    for (int64_t t = 0; t < T; ++t) {
        ids_one.ptr<int32_t>()[t] = int32_t(t);
        w_one.ptr<float>()[t] = 1.0f;
    }
    for (const auto& ctx : {kRef, kFast}) {
        Tensor y2 = zeros({T, H}), y1 = zeros({T, H});
        ops::moe_experts(ctx, x, ex.gate_up, ex.down, ids, w, y2);
        ops::moe_experts(ctx, x, ex.gate_up, ex.down, ids_one, w_one, y1);
        EXPECT_TRUE(near(y2, y1, kExact));
    }
}

TEST(MoeExperts, RejectsBadArguments) {
    const int64_t T = 3, E = 4, H = 8, I = 4;
    Experts ex = make_experts(E, H, I, 360);
    Tensor x = random_tensor({T, H}, 361), y = zeros({T, H});
    Tensor ids = zeros({T, 2}, DType::I32), w = zeros({T, 2});
    EXPECT_NO_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, y));
    ids.ptr<int32_t>()[3] = -1; // another rank's expert (expert parallelism): skipped
    EXPECT_NO_THROW(ops::moe_experts(kRef, x, ex.gate_up, ex.down, ids, w, y));
    for (int32_t bad : {-2, 4}) {
        ids.ptr<int32_t>()[3] = bad;
        EXPECT_THROW(ops::moe_experts(kRef, x, ex.gate_up, ex.down, ids, w, y), Error) << bad;
        EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, y), Error) << bad;
    }
    ids.ptr<int32_t>()[3] = 0;
    Tensor w_bad = zeros({T, 3});
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w_bad, y), Error);
    Tensor gu_odd = random_tensor({E, 2 * I + 1, H}, 362);
    EXPECT_THROW(ops::moe_experts(kFast, x, gu_odd, ex.down, ids, w, y), Error);
    Tensor down_bad = random_tensor({E, H, I + 1}, 363);
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, down_bad, ids, w, y), Error);
    Tensor down_e = random_tensor({E + 1, H, I}, 364);
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, down_e, ids, w, y), Error);
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, x), Error); // alias
    Tensor ids_f = zeros({T, 2});
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids_f, w, y), Error);
    Tensor x_int = zeros({T, H}, DType::I32);
    EXPECT_THROW(ops::moe_experts(kFast, x_int, ex.gate_up, ex.down, ids, w, y), Error);
    Tensor y_int = zeros({T, H}, DType::I32);
    EXPECT_THROW(ops::moe_experts(kFast, x, ex.gate_up, ex.down, ids, w, y_int), Error);
}

// ---------------------------------------------------------------------------------------------
// add_sigmoid_scaled

TEST(AddSigmoidScaled, FastMatchesReferenceAndFormula) {
    for (int64_t T : {1, 3, 17, 150}) {
        for (int64_t H : {8, 2048}) {
            Tensor gate = random_tensor({T, 1}, 370, 3.0f), shared = random_tensor({T, H}, 371);
            Tensor y0 = random_tensor({T, H}, 372);
            Tensor ref = clone(y0), fast = clone(y0), expect = clone(y0);
            ops::add_sigmoid_scaled(kRef, gate, shared, ref);
            ops::add_sigmoid_scaled(kFast, gate, shared, fast);
            EXPECT_TRUE(near(fast, ref, kElementwiseF32)) << "T=" << T << " H=" << H;
            for (int64_t t = 0; t < T; ++t) {
                const double s = 1.0 / (1.0 + std::exp(-double(gate.ptr<float>()[t])));
                for (int64_t c = 0; c < H; ++c)
                    expect.ptr<float>()[t * H + c] =
                        float(y0.ptr<float>()[t * H + c] + s * shared.ptr<float>()[t * H + c]);
            }
            EXPECT_TRUE(near(ref, expect, kElementwiseF32)) << "T=" << T << " H=" << H;
        }
    }
}

TEST(AddSigmoidScaled, HandValues) {
    // sigmoid(0) = 1/2, sigmoid(100) = 1 and sigmoid(-100) = 0 to f32 precision.
    Tensor gate = f32_tensor({3, 1}, {0.0f, 100.0f, -100.0f});
    Tensor shared = f32_tensor({3, 2}, {2.0f, -4.0f, 8.0f, 4.0f, 5.0f, 6.0f});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor y = f32_tensor({3, 2}, {1.0f, 1.0f, 0.0f, -3.0f, 1.0f, -2.0f});
        ops::add_sigmoid_scaled(ctx, gate, shared, y);
        EXPECT_EQ(floats(y), (std::vector<float>{2.0f, -1.0f, 8.0f, 1.0f, 1.0f, -2.0f}));
    }
}

TEST(AddSigmoidScaled, RejectsBadShapes) {
    Tensor gate = random_tensor({3, 1}, 380), shared = random_tensor({3, 8}, 381);
    Tensor y = zeros({3, 8});
    Tensor gate2 = random_tensor({3, 2}, 382), shared_bad = random_tensor({3, 7}, 383);
    Tensor gate_rows = random_tensor({2, 1}, 384);
    EXPECT_THROW(ops::add_sigmoid_scaled(kFast, gate2, shared, y), Error);
    EXPECT_THROW(ops::add_sigmoid_scaled(kFast, gate, shared_bad, y), Error);
    EXPECT_THROW(ops::add_sigmoid_scaled(kFast, gate_rows, shared, y), Error);
}

} // namespace
} // namespace ninfer::test
