// ops/gated_delta_rule.h: gdn_gates and the gated delta rule (recurrent and chunked forms).
#include <random>

#include "ops/gated_delta_rule.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

using ops::GdnAlgo;

// ---------------------------------------------------------------------------------------------
// gdn_gates

double softplus_torch(double u) {
    return u > 20 ? u : std::log1p(std::exp(u));
}

TEST(GdnGates, FastMatchesReferenceAcrossShapes) {
    for (int64_t T : {1, 3, 17, 150}) {
        for (int64_t Hv : {1, 8, 48}) {
            Tensor a = random_tensor({T, Hv}, 61, 4.0f), b = random_tensor({T, Hv}, 62, 3.0f);
            Tensor A_log = random_tensor({Hv}, 63, 1.0f), dt = random_tensor({Hv}, 64, 1.0f);
            Tensor g_ref = zeros({T, Hv}), beta_ref = zeros({T, Hv});
            Tensor g_fast = zeros({T, Hv}), beta_fast = zeros({T, Hv});
            ops::gdn_gates(kRef, a, b, A_log, dt, g_ref, beta_ref);
            ops::gdn_gates(kFast, a, b, A_log, dt, g_fast, beta_fast);
            EXPECT_TRUE(near(g_fast, g_ref, kElementwiseF32)) << "T=" << T << " Hv=" << Hv;
            EXPECT_TRUE(near(beta_fast, beta_ref, kElementwiseF32)) << "T=" << T << " Hv=" << Hv;
        }
    }
}

TEST(GdnGates, ReferenceMatchesFormula) {
    const int64_t T = 9, Hv = 6;
    Tensor a = random_tensor({T, Hv}, 65, 5.0f), b = random_tensor({T, Hv}, 66, 3.0f);
    Tensor A_log = random_tensor({Hv}, 67), dt = random_tensor({Hv}, 68);
    Tensor g = zeros({T, Hv}), beta = zeros({T, Hv});
    ops::gdn_gates(kRef, a, b, A_log, dt, g, beta);
    Tensor g_expect = zeros({T, Hv}), beta_expect = zeros({T, Hv});
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < Hv; ++h) {
            const int64_t i = t * Hv + h;
            const double u = double(a.ptr<float>()[i]) + double(dt.ptr<float>()[h]);
            g_expect.ptr<float>()[i] =
                float(-std::exp(double(A_log.ptr<float>()[h])) * softplus_torch(u));
            beta_expect.ptr<float>()[i] = float(1.0 / (1.0 + std::exp(-double(b.ptr<float>()[i]))));
        }
    EXPECT_TRUE(near(g, g_expect, kElementwiseF32));
    EXPECT_TRUE(near(beta, beta_expect, kElementwiseF32));
}

TEST(GdnGates, SoftplusThresholdAndExtremes) {
    // u = a + dt_bias: 0 -> log 2; 1000 and 100 -> u (the threshold, no overflow to inf);
    // -30 -> ~exp(-30), tiny but not zero. A_log = log 2 doubles every g.
    Tensor a = f32_tensor({1, 4}, {0.5f, 999.5f, 99.5f, -30.5f});
    Tensor dt = f32_tensor({4}, {-0.5f, 0.5f, 0.5f, 0.5f});
    Tensor A_log = f32_tensor({4}, {std::log(2.0f), 0.0f, 0.0f, 0.0f});
    Tensor b = f32_tensor({1, 4}, {0.0f, 100.0f, -100.0f, std::log(3.0f)});
    for (const auto& ctx : {kRef, kFast}) {
        Tensor g = zeros({1, 4}), beta = zeros({1, 4});
        ops::gdn_gates(ctx, a, b, A_log, dt, g, beta);
        EXPECT_NEAR(g.ptr<float>()[0], -2.0 * std::log(2.0), 1e-6);
        EXPECT_FLOAT_EQ(g.ptr<float>()[1], -1000.0f);
        EXPECT_FLOAT_EQ(g.ptr<float>()[2], -100.0f);
        EXPECT_LT(g.ptr<float>()[3], 0.0f);
        EXPECT_NEAR(g.ptr<float>()[3], -std::exp(-30.0), 1e-15);
        EXPECT_FLOAT_EQ(beta.ptr<float>()[0], 0.5f);
        EXPECT_FLOAT_EQ(beta.ptr<float>()[1], 1.0f);
        EXPECT_GE(beta.ptr<float>()[2], 0.0f);
        EXPECT_LT(beta.ptr<float>()[2], 1e-40f);
        EXPECT_FLOAT_EQ(beta.ptr<float>()[3], 0.75f);
    }
}

TEST(GdnGates, RejectsBadShapes) {
    Tensor a = random_tensor({3, 4}, 69), b = random_tensor({3, 4}, 70);
    Tensor A_log = random_tensor({4}, 71), dt = random_tensor({4}, 72);
    Tensor g = zeros({3, 4}), beta = zeros({3, 4});
    Tensor b_bad = random_tensor({3, 5}, 73), dt_bad = random_tensor({5}, 74);
    Tensor g_bad = zeros({2, 4}), g_int = zeros({3, 4}, DType::I32);
    EXPECT_THROW(ops::gdn_gates(kFast, a, b_bad, A_log, dt, g, beta), Error);
    EXPECT_THROW(ops::gdn_gates(kFast, a, b, A_log, dt_bad, g, beta), Error);
    EXPECT_THROW(ops::gdn_gates(kFast, a, b, A_log, dt, g_bad, beta), Error);
    EXPECT_THROW(ops::gdn_gates(kFast, a, b, A_log, dt, g_int, beta), Error);
}

// ---------------------------------------------------------------------------------------------
// gated_delta_rule

struct GdnProblem {
    int64_t T, Hk, Hv, dk, dv;
    Tensor q, k, v, g, beta;
};

// Random inputs with realistic gates: g = -exp(N(-2, 1)) (decays from ~0.99 to ~0.1 per step),
// beta in (0, 1).
GdnProblem make_problem(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, uint64_t seed) {
    GdnProblem p{T,
                 Hk,
                 Hv,
                 dk,
                 dv,
                 random_tensor({T, Hk, dk}, seed, 1.0f),
                 random_tensor({T, Hk, dk}, seed + 1, 1.0f),
                 random_tensor({T, Hv, dv}, seed + 2),
                 zeros({T, Hv}),
                 zeros({T, Hv})};
    std::mt19937_64 gen(seed + 3);
    std::normal_distribution<double> n(0.0, 1.0);
    for (int64_t i = 0; i < T * Hv; ++i) {
        p.g.ptr<float>()[i] = float(-std::exp(n(gen) - 2.0));
        p.beta.ptr<float>()[i] = float(1.0 / (1.0 + std::exp(-n(gen))));
    }
    return p;
}

// Slots of continuing sequences (pos_begin > 0) hold a random state, fresh ones zeros; other
// slots hold random values that must survive untouched.
Tensor make_state(const std::vector<SeqSpec>& seqs, int64_t slots, const GdnProblem& p,
                  uint64_t seed) {
    Tensor st = random_tensor({slots, p.Hv, p.dk, p.dv}, seed, 0.5f);
    const int64_t per_slot = p.Hv * p.dk * p.dv;
    for (const SeqSpec& s : seqs)
        if (s.pos_begin == 0)
            for (int64_t i = 0; i < per_slot; ++i) st.ptr<float>()[s.slot * per_slot + i] = 0;
    return st;
}

void run(const ops::ExecContext& ctx, const GdnProblem& p, const ops::SeqBatch& batch,
         const TensorView& state, const TensorView& out, GdnAlgo algo) {
    ops::gated_delta_rule(ctx, p.q, p.k, p.v, p.g, p.beta, batch, state, out, algo);
}

// The contract's per-token recurrence in FP64, value head h reading key head h / (Hv / Hk).
void naive_gdn(const GdnProblem& p, const ops::SeqBatch& b, const Tensor& state,
               const Tensor& out) {
    const int64_t dk = p.dk, dv = p.dv, ratio = p.Hv / p.Hk;
    auto normalized = [&](const Tensor& t, int64_t r, int64_t hk, double extra) {
        const float* src = t.ptr<float>() + (r * p.Hk + hk) * dk;
        double sum = 0;
        for (int64_t i = 0; i < dk; ++i) sum += double(src[i]) * src[i];
        std::vector<double> res(static_cast<size_t>(dk), 0.0);
        for (int64_t i = 0; i < dk; ++i) res[size_t(i)] = src[i] / std::sqrt(sum + 1e-6) * extra;
        return res;
    };
    for (int32_t s = 0; s < b.num_seqs; ++s) {
        for (int64_t h = 0; h < p.Hv; ++h) {
            float* st = state.ptr<float>() + (b.host_state_slot[s] * p.Hv + h) * dk * dv;
            std::vector<double> S(st, st + dk * dv);
            for (int64_t r = b.host_row_begin[s]; r < b.host_row_begin[s + 1]; ++r) {
                const std::vector<double> kn = normalized(p.k, r, h / ratio, 1.0);
                const std::vector<double> qn =
                    normalized(p.q, r, h / ratio, 1.0 / std::sqrt(double(dk)));
                const double decay = std::exp(double(p.g.ptr<float>()[r * p.Hv + h]));
                const double beta = p.beta.ptr<float>()[r * p.Hv + h];
                for (double& x : S) x *= decay;
                for (int64_t j = 0; j < dv; ++j) {
                    double stk = 0; // (S^T k^)_j
                    for (int64_t i = 0; i < dk; ++i) stk += S[i * dv + j] * kn[size_t(i)];
                    const double u =
                        beta * (double(p.v.ptr<float>()[(r * p.Hv + h) * dv + j]) - stk);
                    for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += kn[size_t(i)] * u;
                }
                for (int64_t j = 0; j < dv; ++j) {
                    double o = 0;
                    for (int64_t i = 0; i < dk; ++i) o += S[i * dv + j] * qn[size_t(i)];
                    out.ptr<float>()[(r * p.Hv + h) * dv + j] = float(o);
                }
            }
            for (int64_t i = 0; i < dk * dv; ++i) st[i] = float(S[size_t(i)]);
        }
    }
}

// A ragged batch: a decode row, a prompt of 70 rows, an empty sequence, a continued chunk of 130
// rows (three chunks with a tail), a short chunk; slots out of order, slot 2 unused.
const std::vector<SeqSpec> kRagged{
    {1, 10, 3}, {70, 0, 0}, {0, 5, 4}, {130, 33, 1}, {5, 2, 5},
};
constexpr int64_t kRaggedSlots = 6;

TEST(GatedDeltaRule, ReferenceMatchesNaiveRecurrence) {
    // Tiny heads, every key/value head ratio, a ragged batch with carried states.
    for (int64_t ratio : {1, 2, 3, 4}) {
        HostBatch batch(kRagged);
        GdnProblem p = make_problem(batch.num_rows(), 2, 2 * ratio, 4, 3, 80 + uint64_t(ratio));
        Tensor st = make_state(kRagged, kRaggedSlots, p, 90), st_expect = clone(st);
        Tensor out = zeros({p.T, p.Hv, p.dv}), expect = zeros({p.T, p.Hv, p.dv});
        run(kRef, p, batch, st, out, GdnAlgo::Recurrent);
        naive_gdn(p, batch, st_expect, expect);
        // Both run the recurrence in FP64 and round once to f32.
        EXPECT_TRUE(near(out, expect, kElementwiseF32)) << "ratio=" << ratio;
        EXPECT_TRUE(near(st, st_expect, kElementwiseF32)) << "ratio=" << ratio;
    }
}

TEST(GatedDeltaRule, HeadGroupingIsConsecutive) {
    // Value heads 0..2 read key head 0 and 3..5 key head 1 (h / (Hv / Hk)), not h % Hk: with a
    // zero key head 1, only value heads 3..5 see a zero key and keep a zero state.
    const int64_t T = 3, Hk = 2, Hv = 6, dk = 4, dv = 2;
    GdnProblem p = make_problem(T, Hk, Hv, dk, dv, 95);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < dk; ++i) p.k.ptr<float>()[(t * Hk + 1) * dk + i] = 0;
    HostBatch batch({{int32_t(T), 0, 0}});
    for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked}) {
        Tensor st = zeros({1, Hv, dk, dv}), out = zeros({T, Hv, dv});
        run(kRef, p, batch, st, out, algo);
        for (int64_t h = 0; h < Hv; ++h) {
            double norm = 0;
            for (int64_t i = 0; i < dk * dv; ++i)
                norm += std::fabs(st.ptr<float>()[h * dk * dv + i]);
            if (h < 3)
                EXPECT_GT(norm, 0.0) << "h=" << h;
            else
                EXPECT_EQ(norm, 0.0) << "h=" << h;
        }
    }
}

TEST(GatedDeltaRule, ChunkedMatchesRecurrentInReference) {
    // Both forms run in FP64 and agree to ~1e-16; their f32 outputs and states must then round
    // to the same values, which is what kAlgebraicF64 demands of f32 tensors.
    for (int64_t d : {16, 64}) {
        for (int64_t ratio : {1, 2, 3, 4}) {
            HostBatch batch(kRagged);
            GdnProblem p =
                make_problem(batch.num_rows(), 2, 2 * ratio, 2 * d, d, 100 + uint64_t(ratio + d));
            Tensor st_rec = make_state(kRagged, kRaggedSlots, p, 101), st_chunk = clone(st_rec);
            Tensor rec = zeros({p.T, p.Hv, p.dv}), chunk = zeros({p.T, p.Hv, p.dv});
            run(kRef, p, batch, st_rec, rec, GdnAlgo::Recurrent);
            run(kRef, p, batch, st_chunk, chunk, GdnAlgo::Chunked);
            EXPECT_TRUE(near(chunk, rec, kAlgebraicF64)) << "dv=" << d << " ratio=" << ratio;
            EXPECT_TRUE(near(st_chunk, st_rec, kAlgebraicF64)) << "dv=" << d << " ratio=" << ratio;
        }
    }
}

TEST(GatedDeltaRule, FastMatchesReferenceAcrossHeadRatios) {
    for (int64_t ratio : {1, 2, 3, 4}) {
        for (int64_t T : {1, 3, 17, 64, 65, 150}) {
            const std::vector<SeqSpec> one{{int32_t(T), 7, 1}};
            HostBatch batch(one);
            GdnProblem p = make_problem(T, 2, 2 * ratio, 64, 64, 110 + uint64_t(T));
            Tensor st0 = make_state(one, 2, p, 111);
            Tensor st_ref = clone(st0), ref = zeros({T, p.Hv, p.dv});
            run(kRef, p, batch, st_ref, ref, GdnAlgo::Recurrent);
            for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked, GdnAlgo::Auto}) {
                Tensor st = clone(st0), out = zeros({T, p.Hv, p.dv});
                run(kFast, p, batch, st, out, algo);
                EXPECT_TRUE(near(out, ref, kRecurrenceF32))
                    << "ratio=" << ratio << " T=" << T << " algo=" << int(algo);
                EXPECT_TRUE(near(st, st_ref, kRecurrenceF32))
                    << "ratio=" << ratio << " T=" << T << " algo=" << int(algo);
                EXPECT_TRUE(near(rows(st, 0, 1), rows(st0, 0, 1), kExact)); // other slot
            }
        }
    }
}

TEST(GatedDeltaRule, FastMatchesReferenceAcrossHeadDims) {
    struct Dims {
        int64_t dk, dv;
    };
    for (Dims d : {Dims{32, 32}, Dims{64, 128}, Dims{128, 128}}) {
        for (int64_t T : {64, 150}) {
            const std::vector<SeqSpec> one{{int32_t(T), 0, 0}};
            HostBatch batch(one);
            GdnProblem p = make_problem(T, 1, 2, d.dk, d.dv, 120 + uint64_t(d.dk + T));
            Tensor st_ref = zeros({1, 2, d.dk, d.dv}), ref = zeros({T, 2, d.dv});
            run(kRef, p, batch, st_ref, ref, GdnAlgo::Chunked);
            for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked}) {
                Tensor st = zeros({1, 2, d.dk, d.dv}), out = zeros({T, 2, d.dv});
                run(kFast, p, batch, st, out, algo);
                EXPECT_TRUE(near(out, ref, kRecurrenceF32))
                    << "dk=" << d.dk << " dv=" << d.dv << " T=" << T << " algo=" << int(algo);
                EXPECT_TRUE(near(st, st_ref, kRecurrenceF32))
                    << "dk=" << d.dk << " dv=" << d.dv << " T=" << T << " algo=" << int(algo);
            }
        }
    }
}

TEST(GatedDeltaRule, RaggedBatchFastMatchesReference) {
    for (int64_t ratio : {1, 3}) {
        HostBatch batch(kRagged);
        GdnProblem p = make_problem(batch.num_rows(), 2, 2 * ratio, 64, 64, 130 + uint64_t(ratio));
        Tensor st0 = make_state(kRagged, kRaggedSlots, p, 131);
        Tensor st_ref = clone(st0), ref = zeros({p.T, p.Hv, p.dv});
        run(kRef, p, batch, st_ref, ref, GdnAlgo::Recurrent);
        for (int64_t slot : {2, 4}) // unused slot, slot of the empty sequence
            EXPECT_TRUE(near(rows(st_ref, slot, 1), rows(st0, slot, 1), kExact)) << slot;
        for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked, GdnAlgo::Auto}) {
            Tensor st = clone(st0), out = zeros({p.T, p.Hv, p.dv});
            run(kFast, p, batch, st, out, algo);
            EXPECT_TRUE(near(out, ref, kRecurrenceF32))
                << "ratio=" << ratio << " algo=" << int(algo);
            EXPECT_TRUE(near(st, st_ref, kRecurrenceF32))
                << "ratio=" << ratio << " algo=" << int(algo);
        }
    }
}

TEST(GatedDeltaRule, TwoCallsEqualOneCall) {
    const int64_t T = 150, Hk = 2, Hv = 4, dk = 32, dv = 32;
    GdnProblem p = make_problem(T, Hk, Hv, dk, dv, 140);
    HostBatch whole({{int32_t(T), 0, 1}});
    Tensor st_ref = zeros({2, Hv, dk, dv}), ref = zeros({T, Hv, dv});
    run(kRef, p, whole, st_ref, ref, GdnAlgo::Recurrent);
    Tensor st_fast = zeros({2, Hv, dk, dv}), fast = zeros({T, Hv, dv});
    run(kFast, p, whole, st_fast, fast, GdnAlgo::Recurrent);
    for (int64_t split : {1, 37, 64, 100, 149}) {
        auto part = [&](int64_t r0, int64_t n) {
            GdnProblem s{n, Hk, Hv, dk, dv, {}, {}, {}, {}, {}};
            s.q = clone(rows(p.q, r0, n));
            s.k = clone(rows(p.k, r0, n));
            s.v = clone(rows(p.v, r0, n));
            s.g = clone(rows(p.g, r0, n));
            s.beta = clone(rows(p.beta, r0, n));
            return s;
        };
        const GdnProblem first = part(0, split), second = part(split, T - split);
        HostBatch b1({{int32_t(split), 0, 1}}), b2({{int32_t(T - split), int32_t(split), 1}});
        for (const auto& ctx : {kRef, kFast}) {
            for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked}) {
                Tensor st = zeros({2, Hv, dk, dv}), out = zeros({T, Hv, dv});
                run(ctx, first, b1, st, rows(out, 0, split), algo);
                run(ctx, second, b2, st, rows(out, split, T - split), algo);
                // The state is stored in f32 between the calls: a recurrence-level difference.
                EXPECT_TRUE(near(out, ref, kRecurrenceF32))
                    << "split=" << split << " ref=" << ctx.reference() << " algo=" << int(algo);
                EXPECT_TRUE(near(st, st_ref, kRecurrenceF32))
                    << "split=" << split << " ref=" << ctx.reference() << " algo=" << int(algo);
                if (!ctx.reference() && algo == GdnAlgo::Recurrent) {
                    // The f32 recurrence holds its state in f32 anyway: bit-identical.
                    EXPECT_TRUE(near(out, fast, kExact)) << "split=" << split;
                    EXPECT_TRUE(near(st, st_fast, kExact)) << "split=" << split;
                }
            }
        }
    }
}

// A bf16 copy of an f32 state (round to nearest even), and the f32 state holding those values.
Tensor to_bf16(const Tensor& f32) {
    Tensor out = zeros({f32.size(0), f32.size(1), f32.size(2), f32.size(3)}, DType::BF16);
    convert_from_f32(f32.ptr<float>(), out.view().data, DType::BF16, f32.numel());
    return out;
}
Tensor to_f32(const Tensor& bf16) {
    Tensor out = zeros({bf16.size(0), bf16.size(1), bf16.size(2), bf16.size(3)});
    convert_to_f32(bf16.view().data, DType::BF16, out.ptr<float>(), bf16.numel());
    return out;
}

TEST(GatedDeltaRule, Bf16StateRoundsOnlyWhereItIsStored) {
    // The contract: a BF16 state is read to the accumulator and rounded once per store. From the
    // same (bf16-exact) start, a call's outputs then equal the F32 state's bit for bit, and the
    // state it leaves is the F32 run's rounded to bf16, in every slot it writes and no other.
    HostBatch batch(kRagged);
    GdnProblem p = make_problem(batch.num_rows(), 2, 4, 32, 16, 160);
    const Tensor start = to_f32(to_bf16(make_state(kRagged, kRaggedSlots, p, 161)));
    for (const auto& ctx : {kRef, kFast})
        for (GdnAlgo algo : {GdnAlgo::Recurrent, GdnAlgo::Chunked}) {
            Tensor st32 = clone(start), st16 = to_bf16(start);
            Tensor out32 = zeros({p.T, p.Hv, p.dv}), out16 = zeros({p.T, p.Hv, p.dv});
            run(ctx, p, batch, st32, out32, algo);
            run(ctx, p, batch, st16, out16, algo);
            EXPECT_TRUE(near(out16, out32, kExact)) << ctx.reference() << " " << int(algo);
            EXPECT_TRUE(near(to_f32(st16), to_f32(to_bf16(st32)), kExact))
                << ctx.reference() << " " << int(algo);
            // Not vacuous: the f32 run's state is not bf16-exact (so the store did round).
            EXPECT_FALSE(near(st32, to_f32(to_bf16(st32)), kExact));
        }
}

TEST(GatedDeltaRule, Bf16StateSnapshotsRoundEachRow) {
    // Per-row snapshots (verification): the state after each earlier row is stored, rounded, to
    // the sequence's snapshot rows; the rows between stay in f32 registers, so the outputs still
    // equal the F32 state's.
    const int64_t T = 5, slots = 1 + T;
    GdnProblem p = make_problem(T, 2, 4, 32, 16, 170);
    HostBatch batch({{int32_t(T), 7, 0}});
    batch.set_snapshot_rows({1});
    const Tensor start = to_f32(to_bf16(random_tensor({slots, p.Hv, p.dk, p.dv}, 171, 0.5f)));
    Tensor st32 = clone(start), st16 = to_bf16(start);
    Tensor out32 = zeros({T, p.Hv, p.dv}), out16 = zeros({T, p.Hv, p.dv});
    run(kFast, p, batch, st32, out32, GdnAlgo::Auto);
    run(kFast, p, batch, st16, out16, GdnAlgo::Auto);
    EXPECT_TRUE(near(out16, out32, kExact));
    EXPECT_TRUE(near(to_f32(st16), to_f32(to_bf16(st32)), kExact));
    EXPECT_FALSE(near(st32, start, kExact)); // the snapshot rows were written
}

TEST(GatedDeltaRule, RejectsBadArguments) {
    const int64_t T = 4, Hk = 2, Hv = 4, dk = 8, dv = 8;
    GdnProblem p = make_problem(T, Hk, Hv, dk, dv, 150);
    HostBatch batch({{3, 0, 0}, {1, 5, 1}});
    Tensor st = zeros({2, Hv, dk, dv}), out = zeros({T, Hv, dv});
    EXPECT_NO_THROW(run(kFast, p, batch, st, out, GdnAlgo::Auto));
    Tensor v_bad = random_tensor({T, 3, dv}, 151); // 3 value heads over 2 key heads
    Tensor g3 = zeros({T, 3}), b3 = zeros({T, 3}), st3 = zeros({2, 3, dk, dv}),
           out3 = zeros({T, 3, dv});
    EXPECT_THROW(ops::gated_delta_rule(kFast, p.q, p.k, v_bad, g3, b3, batch, st3, out3), Error);
    Tensor k_bad = random_tensor({T, Hk, dk + 1}, 152);
    EXPECT_THROW(ops::gated_delta_rule(kFast, p.q, k_bad, p.v, p.g, p.beta, batch, st, out), Error);
    Tensor st_bad = zeros({2, Hv, dk, dv + 1});
    EXPECT_THROW(ops::gated_delta_rule(kFast, p.q, p.k, p.v, p.g, p.beta, batch, st_bad, out),
                 Error);
    Tensor g_bad = zeros({T, Hv + 1});
    EXPECT_THROW(ops::gated_delta_rule(kFast, p.q, p.k, p.v, g_bad, p.beta, batch, st, out), Error);
    for (DType bad : {DType::F64, DType::F16}) { // F32 and BF16 only
        Tensor st_bad_dtype = zeros({2, Hv, dk, dv}, bad);
        EXPECT_THROW(
            ops::gated_delta_rule(kFast, p.q, p.k, p.v, p.g, p.beta, batch, st_bad_dtype, out),
            Error);
    }
    HostBatch bad_slot({{3, 0, 0}, {1, 5, 2}});
    EXPECT_THROW(run(kFast, p, bad_slot, st, out, GdnAlgo::Auto), Error);
    HostBatch bad_rows({{2, 0, 0}, {1, 5, 1}});
    EXPECT_THROW(run(kFast, p, bad_rows, st, out, GdnAlgo::Auto), Error);
}

} // namespace
} // namespace ninfer::test
