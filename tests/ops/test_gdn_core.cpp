// ops/gated_delta_rule.h: gdn_core on the CPU is exactly the composition it is defined by
// (causal_conv1d_silu, gdn_gates, gated_delta_rule, gated_rms_norm), in both modes, on decode
// and prefill batches; and it rejects inconsistent shapes.
#include "ops/conv1d.h"
#include "ops/gated_delta_rule.h"
#include "ops/gated_rms_norm.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

// One GDN layer's inputs: in_proj's output [T, C + Vd + 2 Hv] (qkv | z | b | a), the weights and
// both states (every slot random, so continuing sequences start from nonzero states).
struct GdnLayer {
    int64_t Hk, Hv, dk, dv, K, T, slots;
    int64_t C = 2 * Hk * dk + Hv * dv, Vd = Hv * dv;
    Tensor proj = random_tensor({T, C + Vd + 2 * Hv}, 300);
    Tensor conv_w = random_tensor({C, K}, 301, 0.4f);
    Tensor A_log = random_tensor({Hv}, 302, 0.5f), dt_bias = random_tensor({Hv}, 303, 0.5f);
    Tensor norm_w = random_tensor({dv}, 304, 0.2f);
    Tensor conv_state = random_tensor({slots, C, K - 1}, 305);
    Tensor state = random_tensor({slots, Hv, dk, dv}, 306, 0.1f);

    TensorView qkv() const { return proj.view().narrow(1, 0, C); }
    TensorView z() const { return proj.view().narrow(1, C, Vd); }
    TensorView b() const { return proj.view().narrow(1, C + Vd, Hv); }
    TensorView a() const { return proj.view().narrow(1, C + Vd + Hv, Hv); }
};

constexpr float kEps = 1e-6f;

struct Outputs {
    Tensor core, conv_state, state;
};

Outputs run_op(const ops::ExecContext& ctx, const GdnLayer& l, const ops::SeqBatch& batch) {
    Outputs o{zeros({l.T, l.Hv, l.dv}), clone(l.conv_state), clone(l.state)};
    Tensor conv_out = zeros({l.T, l.C}), g = zeros({l.T, l.Hv}), beta = zeros({l.T, l.Hv});
    ops::gdn_core(ctx, l.qkv(), l.z(), l.b(), l.a(), l.conv_w, l.A_log, l.dt_bias, l.norm_w, kEps,
                  batch, o.conv_state, o.state, conv_out, g, beta, o.core);
    return o;
}

Outputs run_composition(const ops::ExecContext& ctx, const GdnLayer& l,
                        const ops::SeqBatch& batch) {
    Outputs o{zeros({l.T, l.Hv, l.dv}), clone(l.conv_state), clone(l.state)};
    Tensor conv_out = zeros({l.T, l.C}), g = zeros({l.T, l.Hv}), beta = zeros({l.T, l.Hv});
    ops::causal_conv1d_silu(ctx, l.qkv(), l.conv_w, batch, o.conv_state, conv_out);
    ops::gdn_gates(ctx, l.a(), l.b(), l.A_log, l.dt_bias, g, beta);
    const int64_t Kd = l.Hk * l.dk;
    ops::gated_delta_rule(ctx, conv_out.view().split_heads(0, l.Hk, l.dk),
                          conv_out.view().split_heads(Kd, l.Hk, l.dk),
                          conv_out.view().split_heads(2 * Kd, l.Hv, l.dv), g, beta, batch, o.state,
                          o.core);
    ops::gated_rms_norm(ctx, o.core, l.z().split_heads(0, l.Hv, l.dv), l.norm_w, kEps, o.core);
    return o;
}

void expect_composition(const GdnLayer& l, const std::vector<SeqSpec>& seqs) {
    HostBatch batch(seqs);
    for (const auto& ctx : {kRef, kFast}) {
        const Outputs op = run_op(ctx, l, batch), ref = run_composition(ctx, l, batch);
        const char* mode = ctx.reference() ? "reference" : "fast";
        EXPECT_TRUE(near(op.core, ref.core, kExact)) << mode;
        EXPECT_TRUE(near(op.conv_state, ref.conv_state, kExact)) << mode;
        EXPECT_TRUE(near(op.state, ref.state, kExact)) << mode;
        // Not vacuous: the output is nonzero and the sequences' recurrent states moved.
        EXPECT_FALSE(near(op.core, zeros({l.T, l.Hv, l.dv}), kExact)) << mode;
        EXPECT_FALSE(near(op.state, l.state, kExact)) << mode;
    }
}

TEST(GdnCore, DecodeRowsEqualComposition) {
    // Three one-row sequences in slots 3, 0, 2 (slot 1 must stay untouched); value heads 2 per
    // key head; dk != dv so the derived head counts are checked.
    const GdnLayer l{2, 4, 8, 16, 4, 3, 4};
    expect_composition(l, {{1, 7, 3}, {1, 2, 0}, {1, 11, 2}});
}

TEST(GdnCore, PrefillAndMixedRowsEqualComposition) {
    const GdnLayer l{2, 6, 16, 16, 4, 9, 3}; // 3 value heads per key head
    expect_composition(l, {{5, 0, 2}, {1, 4, 0}, {3, 9, 1}});
}

TEST(GdnCore, RejectsInconsistentShapes) {
    const GdnLayer l{2, 4, 8, 16, 4, 2, 2};
    HostBatch batch({{1, 0, 0}, {1, 0, 1}});
    Tensor core = zeros({l.T, l.Hv, l.dv}), conv_out = zeros({l.T, l.C});
    Tensor g = zeros({l.T, l.Hv}), beta = zeros({l.T, l.Hv});
    Tensor conv_state = clone(l.conv_state), state = clone(l.state);
    auto call = [&](const TensorView& qkv, const TensorView& rec, const TensorView& co,
                    const TensorView& out) {
        ops::gdn_core(kFast, qkv, l.z(), l.b(), l.a(), l.conv_w, l.A_log, l.dt_bias, l.norm_w, kEps,
                      batch, conv_state, rec, co, g, beta, out);
    };
    EXPECT_NO_THROW(call(l.qkv(), state, conv_out, core));
    // qkv one column short: not 2 Hk dk + Hv dv.
    EXPECT_THROW(call(l.proj.view().narrow(1, 0, l.C - 1), state, conv_out, core), Error);
    // A state of 2 value heads reads the qkv width as 4 key heads, which 2 is no multiple of.
    Tensor state2 = zeros({2, 2, l.dk, l.dv});
    EXPECT_THROW(call(l.qkv(), state2, conv_out, core), Error);
    // conv_out aliasing qkv.
    EXPECT_THROW(call(l.qkv(), state, l.qkv(), core), Error);
    // core of the wrong head dim.
    Tensor core_bad = zeros({l.T, l.Hv, l.dk});
    EXPECT_THROW(call(l.qkv(), state, conv_out, core_bad), Error);
}

} // namespace
} // namespace ninfer::test
