// ops/moe.h: moe_block on the CPU is the composition of moe_route, moe_experts, the shared
// expert's linear + silu_mul + linear and add_sigmoid_scaled (bit for bit, both modes); the
// reference against the formula by hand; Fast against Reference; argument checks; expert
// parallelism: blocks over runs of the experts (held experts) sum to the whole block.
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

struct Block {
    int64_t E, k, H, I, Is;
    Tensor egu, edown, sgu, sdown; // [E, 2I, H], [E, H, I], [2Is, H], [H, Is]
};

Block make_block(int64_t E, int64_t k, int64_t H, int64_t I, int64_t Is, uint64_t seed) {
    return {E,
            k,
            H,
            I,
            Is,
            random_tensor({E, 2 * I, H}, seed, 1.0f / std::sqrt(float(H))),
            random_tensor({E, H, I}, seed + 1, 1.0f / std::sqrt(float(I))),
            random_tensor({2 * Is, H}, seed + 2, 1.0f / std::sqrt(float(H))),
            random_tensor({H, Is}, seed + 3, 1.0f / std::sqrt(float(Is)))};
}

// The op sequence moe_block is defined by (what Qwen35Model::mlp_block ran before the op).
void composed(const ops::ExecContext& ctx, const TensorView& h, const TensorView& logits,
              const Block& b, const TensorView& y) {
    const int64_t T = h.size(0);
    Tensor w = zeros({T, b.k}), ids = zeros({T, b.k}, DType::I32);
    ops::moe_route(ctx, logits.narrow(1, 0, b.E), b.k, w, ids);
    ops::moe_experts(ctx, h, b.egu, b.edown, ids, w, y);
    Tensor gu = zeros({T, 2 * b.Is}), act = zeros({T, b.Is}), shared = zeros({T, b.H});
    ops::linear(ctx, h, b.sgu, gu);
    ops::silu_mul(ctx, gu, act);
    ops::linear(ctx, act, b.sdown, shared);
    ops::add_sigmoid_scaled(ctx, logits.narrow(1, b.E, 1), shared, y);
}

TEST(MoeBlock, EqualsTheCompositionBitForBit) {
    for (const ops::ExecContext& ctx : {kRef, kFast}) {
        for (int64_t T : {1, 5, 33}) {
            const Block b = make_block(8, 2, 32, 16, 24, 500 + uint64_t(T));
            Tensor h = random_tensor({T, b.H}, 510),
                   logits = random_tensor({T, b.E + 1}, 511, 2.0f);
            Tensor y0 = random_tensor({T, b.H}, 512), got = clone(y0), want = clone(y0);
            ops::moe_block(ctx, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, got);
            composed(ctx, h, logits, b, want);
            EXPECT_TRUE(near(got, want, kExact)) << "T=" << T << " ref=" << ctx.reference();
        }
    }
}

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// y0 + sum_j w_j * swiglu_e(h) + sigmoid(gate) * swiglu_shared(h) for one token, in f64.
std::vector<double> by_hand(const float* h, const float* logits, const float* y0, const Block& b,
                            const std::vector<int32_t>& ids, const std::vector<double>& w) {
    auto swiglu = [&](const float* gu, const float* down, int64_t I, std::vector<double>& out,
                      double scale) {
        std::vector<double> act(static_cast<size_t>(I));
        for (int64_t i = 0; i < I; ++i) {
            double g = 0, u = 0;
            for (int64_t c = 0; c < b.H; ++c) {
                g += double(gu[i * b.H + c]) * h[c];
                u += double(gu[(I + i) * b.H + c]) * h[c];
            }
            act[size_t(i)] = silu(g) * u;
        }
        for (int64_t c = 0; c < b.H; ++c) {
            double o = 0;
            for (int64_t i = 0; i < I; ++i) o += double(down[c * I + i]) * act[size_t(i)];
            out[size_t(c)] += scale * o;
        }
    };
    std::vector<double> y(y0, y0 + b.H);
    for (size_t j = 0; j < ids.size(); ++j)
        swiglu(b.egu.ptr<float>() + ids[j] * 2 * b.I * b.H,
               b.edown.ptr<float>() + ids[j] * b.H * b.I, b.I, y, w[j]);
    swiglu(b.sgu.ptr<float>(), b.sdown.ptr<float>(), b.Is, y,
           1.0 / (1.0 + std::exp(-double(logits[b.E]))));
    return y;
}

TEST(MoeBlock, ReferenceMatchesTheFormula) {
    // E = 5, top-2 over logits [ln 4, ln 2, 0, 0, ln 2]: experts 0 and 1 (the tie 1 vs 4 goes
    // to the lower id) with weights 2/3 and 1/3; the shared gate logit is 0.7.
    const Block b = make_block(5, 2, 12, 6, 10, 520);
    const float l2 = std::log(2.0f), l4 = std::log(4.0f);
    Tensor logits = f32_tensor({1, 6}, {l4, l2, 0.0f, 0.0f, l2, 0.7f});
    Tensor h = random_tensor({1, b.H}, 521), y = random_tensor({1, b.H}, 522), y0 = clone(y);
    ops::moe_block(kRef, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, y);
    const std::vector<double> want = by_hand(h.ptr<float>(), logits.ptr<float>(), y0.ptr<float>(),
                                             b, {0, 1}, {2.0 / 3.0, 1.0 / 3.0});
    Tensor expect = zeros({1, b.H});
    for (int64_t c = 0; c < b.H; ++c) expect.ptr<float>()[c] = float(want[size_t(c)]);
    EXPECT_TRUE(near(y, expect, kReductionF32));
}

TEST(MoeBlock, FastMatchesReference) {
    const Block b = make_block(16, 4, 64, 32, 48, 530);
    for (int64_t T : {1, 7, 40}) {
        Tensor h = random_tensor({T, b.H}, 531), logits = random_tensor({T, b.E + 1}, 532, 2.0f);
        Tensor y0 = random_tensor({T, b.H}, 533), ref = clone(y0), fast = clone(y0);
        ops::moe_block(kRef, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, ref);
        ops::moe_block(kFast, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, fast);
        EXPECT_TRUE(near(fast, ref, kReductionF32)) << "T=" << T;
    }
}

TEST(MoeBlock, RejectsBadArguments) {
    const int64_t T = 3;
    const Block b = make_block(4, 2, 8, 4, 8, 540);
    Tensor h = random_tensor({T, b.H}, 541), logits = random_tensor({T, b.E + 1}, 542);
    Tensor y = zeros({T, b.H});
    auto run = [&](const TensorView& hh, const TensorView& l, int64_t k, const TensorView& egu,
                   const TensorView& edown, const TensorView& sgu, const TensorView& sdown,
                   const TensorView& yy) {
        ops::moe_block(kFast, hh, l, k, egu, edown, sgu, sdown, yy);
    };
    EXPECT_NO_THROW(run(h, logits, 2, b.egu, b.edown, b.sgu, b.sdown, y));
    EXPECT_NO_THROW(run(h.view().narrow(0, 0, 0), logits.view().narrow(0, 0, 0), 2, b.egu, b.edown,
                        b.sgu, b.sdown, y.view().narrow(0, 0, 0))); // T = 0
    Tensor logits_e = random_tensor({T, b.E}, 543);                 // no shared-gate column
    EXPECT_THROW(run(h, logits_e, 2, b.egu, b.edown, b.sgu, b.sdown, y), Error);
    Tensor logits_i = zeros({T, b.E + 1}, DType::I32);
    EXPECT_THROW(run(h, logits_i, 2, b.egu, b.edown, b.sgu, b.sdown, y), Error);
    EXPECT_THROW(run(h, logits, 0, b.egu, b.edown, b.sgu, b.sdown, y), Error);
    EXPECT_THROW(run(h, logits, 5, b.egu, b.edown, b.sgu, b.sdown, y), Error);
    Tensor edown_bad = random_tensor({b.E, b.H, b.I + 1}, 544);
    EXPECT_THROW(run(h, logits, 2, b.egu, edown_bad, b.sgu, b.sdown, y), Error);
    Tensor sgu_odd = random_tensor({2 * b.Is + 1, b.H}, 545);
    EXPECT_THROW(run(h, logits, 2, b.egu, b.edown, sgu_odd, b.sdown, y), Error);
    Tensor sdown_bad = random_tensor({b.H, b.Is + 2}, 546);
    EXPECT_THROW(run(h, logits, 2, b.egu, b.edown, b.sgu, sdown_bad, y), Error);
    Tensor y_bad = zeros({T, b.H + 1});
    EXPECT_THROW(run(h, logits, 2, b.egu, b.edown, b.sgu, b.sdown, y_bad), Error);
    EXPECT_THROW(run(h, logits, 2, b.egu, b.edown, b.sgu, b.sdown, h), Error); // alias
}

// Expert parallelism: each rank's stacks hold a run of the experts (uneven runs here) and its
// moe_block adds the pairs routed to them; the shared expert runs on one rank (zeros elsewhere,
// where the model splits it by rows instead). The parts sum to the whole block; a rank that
// ignores its run's offset (first_expert 0 everywhere: the sabotage arm) does not.
TEST(MoeBlock, HeldExpertRunsSumToTheWholeBlock) {
    const Block b = make_block(10, 3, 32, 16, 24, 560);
    const std::vector<std::pair<int64_t, int64_t>> runs = {{0, 3}, {3, 3}, {6, 4}};
    for (const ops::ExecContext& ctx : {kRef, kFast}) {
        for (int64_t T : {1, 6, 37}) {
            Tensor h = random_tensor({T, b.H}, 561), logits = random_tensor({T, b.E + 1}, 562, 2.0f);
            Tensor y0 = random_tensor({T, b.H}, 563), whole = clone(y0);
            ops::moe_block(ctx, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, whole);
            for (const bool sabotage : {false, true}) {
                Tensor sum = clone(y0);
                for (const auto& [first, count] : runs) {
                    Tensor sgu = first == 0 ? clone(b.sgu) : zeros({2 * b.Is, b.H});
                    Tensor sdown = first == 0 ? clone(b.sdown) : zeros({b.H, b.Is});
                    ops::moe_block(ctx, h, logits, b.k, b.egu.view().narrow(0, first, count),
                                   b.edown.view().narrow(0, first, count), sgu, sdown, sum,
                                   sabotage ? 0 : first);
                }
                const std::string what = "T=" + std::to_string(T) + " ref=" +
                                         std::to_string(ctx.reference());
                if (sabotage)
                    EXPECT_FALSE(near(sum, whole, kReductionF32)) << what;
                else
                    EXPECT_TRUE(near(sum, whole, kReductionF32)) << what;
            }
        }
    }
    // A run past the router's experts is refused.
    Tensor h = random_tensor({2, b.H}, 564), logits = random_tensor({2, b.E + 1}, 565);
    Tensor y = zeros({2, b.H});
    EXPECT_THROW(ops::moe_block(kFast, h, logits, b.k, b.egu.view().narrow(0, 6, 4),
                                b.edown.view().narrow(0, 6, 4), b.sgu, b.sdown, y, 7),
                 Error);
    EXPECT_THROW(ops::moe_block(kFast, h, logits, b.k, b.egu, b.edown, b.sgu, b.sdown, y, -1),
                 Error);
}

// moe_route with a held run: the weights are the whole route's, the ids the run's (-1 outside).
TEST(MoeRoute, HeldRunKeepsTheWeightsAndMapsTheIds) {
    const int64_t T = 9, E = 12, k = 4;
    Tensor logits = random_tensor({T, E}, 570, 2.0f);
    for (const ops::ExecContext& ctx : {kRef, kFast}) {
        Tensor w_all = zeros({T, k}), id_all = zeros({T, k}, DType::I32);
        Tensor w_run = zeros({T, k}), id_run = zeros({T, k}, DType::I32);
        ops::moe_route(ctx, logits, k, w_all, id_all);
        ops::moe_route(ctx, logits, k, w_run, id_run, {4, 5});
        EXPECT_TRUE(near(w_run, w_all, kExact));
        for (int64_t i = 0; i < T * k; ++i) {
            const int32_t e = id_all.ptr<int32_t>()[i];
            EXPECT_EQ(id_run.ptr<int32_t>()[i], e >= 4 && e < 9 ? e - 4 : -1) << i;
        }
        EXPECT_THROW(ops::moe_route(ctx, logits, k, w_run, id_run, {10, 3}), Error);
    }
}

} // namespace
} // namespace ninfer::test
