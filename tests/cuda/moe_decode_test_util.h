// What the fused MoE decode route's tests share (test_cuda_moe_fp8.cpp, test_cuda_moe_grouped.cpp):
// the route's calls on one block's weights, the inputs of a case, and the case itself. A block
// type M derives MoeDecodeCalls<M> and holds d (with k, H, E), the device weights d_egu, d_edown,
// d_sgu, d_sdown (each with .view) and the dense F32 references egu_ref .. sdown_ref.
#pragma once

#include <string>
#include <utility>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/moe.h"

namespace ninfer::test {

// The shape of router logits [T, E + 1] for h [T, H] (the fits checks read no data).
inline TensorView logits_shape(const TensorView& h, int64_t E) {
    return TensorView::contiguous(nullptr, DType::F32, h.device, {h.size(0), E + 1});
}

template <typename M> struct MoeDecodeCalls {
    // Whether the fused decode route takes h with these weights.
    bool fits(const TensorView& h) const {
        const M& m = self();
        return ops::cuda::moe_block_decode_fits(h, logits_shape(h, m.d.E), m.d.k, m.d_egu.view,
                                                m.d_edown.view, m.d_sgu.view, m.d_sdown.view);
    }
    // y += moe_block(h) through the fused decode route.
    void run(const ops::ExecContext& c, const TensorView& h, const TensorView& logits,
             const TensorView& y) const {
        const M& m = self();
        ops::cuda::moe_block_decode(c, h, logits, m.d.k, m.d_egu.view, m.d_edown.view,
                                    m.d_sgu.view, m.d_sdown.view, y, 0);
    }
    // y0 + moe_block(h) on the FP64 CPU reference, with egu_w for the routed gate/up stack (the
    // negative controls pass a sabotaged one).
    Tensor reference(const Tensor& h, const Tensor& logits, const Tensor& y0,
                     const Tensor& egu_w) const {
        const M& m = self();
        Tensor ref = clone(y0);
        ops::moe_block(kCpuRef, h, logits, m.d.k, egu_w, m.edown_ref, m.sgu_ref, m.sdown_ref,
                       ref);
        return ref;
    }

private:
    const M& self() const { return static_cast<const M&>(*this); }
};

// A case's host inputs: h and y0 rounded to bf16, router logits [T, E + 1].
struct MoeInputs {
    Tensor h, logits, y0;
};
template <typename D> MoeInputs moe_inputs(const D& d, int64_t T, uint64_t seed) {
    return {rounded(random_tensor({T, d.H}, seed), DType::BF16),
            random_tensor({T, d.E + 1}, seed + 1, 2.0f),
            rounded(random_tensor({T, d.H}, seed + 2), DType::BF16)};
}

// A case's inputs on the host and h and the logits on the device, checked to take the route.
struct DecodeInputs {
    MoeInputs in;
    Tensor dh, dlogits;
};
template <typename M>
DecodeInputs decode_inputs(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                           const std::string& what) {
    DecodeInputs d{moe_inputs(m.d, T, seed), {}, {}};
    d.dh = to_device(c, d.in.h, DType::BF16);
    d.dlogits = to_device(c, d.in.logits, DType::F32);
    EXPECT_TRUE(m.fits(d.dh)) << what;
    return d;
}

// y0 + moe_block(h) through the fused decode route against the CPU reference; a second run and
// the dispatcher (ops::moe_block) give the same bits. Returns the device result.
template <typename M>
Tensor check_decode_case(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                         const std::string& what) {
    const DecodeInputs d = decode_inputs(c, m, T, seed, what);
    const MoeInputs& in = d.in;
    const Tensor &dh = d.dh, &dlogits = d.dlogits;
    Tensor y = to_device(c, in.y0, DType::BF16);
    m.run(c, dh, dlogits, y);
    const Tensor out = to_host(c, y);
    EXPECT_TRUE(near(out, m.reference(in.h, in.logits, in.y0, m.egu_ref), kBf16Reduction)) << what;

    Tensor y2 = to_device(c, in.y0, DType::BF16);
    m.run(c, dh, dlogits, y2);
    EXPECT_TRUE(near(to_host(c, y2), out, kExact)) << "second run, " << what;
    Tensor y3 = to_device(c, in.y0, DType::BF16);
    ops::moe_block(c, dh, dlogits, m.d.k, m.d_egu.view, m.d_edown.view, m.d_sgu.view,
                   m.d_sdown.view, y3);
    EXPECT_TRUE(near(to_host(c, y3), out, kExact)) << "ops::moe_block, " << what;
    return out;
}

// moe_down_kernel's early route (NINFER_MOE_DOWN_EARLY_ROUTE, read at every call): on, and its
// sabotage arm (one early expert id wrong, which the check after the dependency wait must
// catch and reload), give the bits of the route without it; an early batch kept past a wrong id
// would read another expert's rows.
template <typename M>
void check_early_route(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                       const std::string& what) {
    const DecodeInputs d = decode_inputs(c, m, T, seed, what);
    const ScopedEnv early("NINFER_MOE_DOWN_EARLY_ROUTE");
    auto run = [&](const char* mode) {
        early.set(mode);
        Tensor y = to_device(c, d.in.y0, DType::BF16);
        m.run(c, d.dh, d.dlogits, y);
        return to_host(c, y);
    };
    const Tensor plain = run(nullptr);
    EXPECT_TRUE(near(run("1"), plain, kExact)) << "early route, " << what;
    EXPECT_TRUE(near(run("sabotage"), plain, kExact)) << "early route, one id wrong, " << what;
}

// A run of a stack's experts: dim 0 of its codes and scales.
inline ops::WeightView held_view(const ops::WeightView& w, int64_t first, int64_t count) {
    ops::WeightView v = w;
    v.w = w.w.narrow(0, first, count);
    if (!w.scale.empty()) v.scale = w.scale.narrow(0, first, count);
    return v;
}

// Expert parallelism (ops/moe.h's held experts): y0 + moe_block with the stacks cut to a run of
// experts [first, first + count) and that offset, on the device through whichever route takes
// T rows, against the CPU reference over the same run, for three runs covering all E. The
// sabotage arm, a run read with offset 0 (a rank taking its ids as global), must not match.
template <typename M>
void check_held_runs(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                     const std::string& what, DType act = DType::BF16) {
    const MoeInputs in = moe_inputs(m.d, T, seed);
    const Tensor dh = to_device(c, in.h, act), dlogits = to_device(c, in.logits, DType::F32);
    const int64_t E = m.d.E;
    const std::pair<int64_t, int64_t> runs[] = {
        {0, E / 3}, {E / 3, E / 2 - E / 3}, {E / 2, E - E / 2}};
    const Tolerance& tol = act == DType::F32 ? kCudaF32 : kBf16Reduction;
    for (const auto& [first, count] : runs)
        for (const bool sabotage : {false, true}) {
            if (sabotage && first == 0) continue;
            Tensor y = to_device(c, in.y0, act);
            ops::moe_block(c, dh, dlogits, m.d.k, held_view(m.d_egu.view, first, count),
                           held_view(m.d_edown.view, first, count), m.d_sgu.view, m.d_sdown.view,
                           y, sabotage ? 0 : first);
            Tensor ref = clone(in.y0);
            ops::moe_block(kCpuRef, in.h, in.logits, m.d.k, m.egu_ref.view().narrow(0, first, count),
                           m.edown_ref.view().narrow(0, first, count), m.sgu_ref, m.sdown_ref, ref,
                           first);
            const std::string run = what + " T=" + std::to_string(T) + " experts [" +
                                    std::to_string(first) + ", +" + std::to_string(count) + ")";
            if (sabotage)
                EXPECT_FALSE(near(to_host(c, y), ref, tol)) << "offset dropped, " << run;
            else
                EXPECT_TRUE(near(to_host(c, y), ref, tol)) << run;
        }
}

// Batch invariance: every row of a T-row ops::moe_block equals that row run alone (T = 1), bit
// for bit (ops/moe.h: a row's bits do not depend on the other rows of the call), so batched
// requests are identical to lone ones; a kernel that shares work across tokens (a down warp
// serving several tokens, tried on 2026-12-06) must keep it. Returns how many rows differed.
template <typename M>
int check_rows_equal_alone(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                           const std::string& what, DType act = DType::BF16) {
    const MoeInputs in = moe_inputs(m.d, T, seed);
    auto run = [&](const TensorView& h, const TensorView& logits, const TensorView& y0) {
        Tensor y = to_device(c, y0, act);
        ops::moe_block(c, to_device(c, h, act), to_device(c, logits, DType::F32), m.d.k,
                       m.d_egu.view, m.d_edown.view, m.d_sgu.view, m.d_sdown.view, y);
        return to_host(c, y);
    };
    const Tensor all = run(in.h, in.logits, in.y0);
    int differed = 0;
    for (int64_t t = 0; t < T; ++t) {
        const Tensor alone = run(in.h.view().narrow(0, t, 1), in.logits.view().narrow(0, t, 1),
                                 in.y0.view().narrow(0, t, 1));
        const bool same = near(alone, clone(all.view().narrow(0, t, 1)), kExact);
        differed += !same;
        EXPECT_TRUE(same) << what << ": row " << t << " of T=" << T << " differs from it alone";
    }
    return differed;
}

} // namespace ninfer::test
