// What the fused MoE decode route's tests share (test_cuda_moe_fp8.cpp, test_cuda_moe_grouped.cpp):
// the route's calls on one block's weights, the inputs of a case, and the case itself. A block
// type M derives MoeDecodeCalls<M> and holds d (with k, H, E), the device weights d_egu, d_edown,
// d_sgu, d_sdown (each with .view) and the dense F32 references egu_ref .. sdown_ref.
#pragma once

#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/moe.h"

namespace ninfer::test {

template <typename M> struct MoeDecodeCalls {
    // Whether the fused decode route takes h with these weights.
    bool fits(const TensorView& h) const {
        const M& m = self();
        return ops::cuda::moe_block_decode_fits(h, m.d.k, m.d_egu.view, m.d_edown.view,
                                                m.d_sgu.view, m.d_sdown.view);
    }
    // y += moe_block(h) through the fused decode route.
    void run(const ops::ExecContext& c, const TensorView& h, const TensorView& logits,
             const TensorView& y) const {
        const M& m = self();
        ops::cuda::moe_block_decode(c, h, logits, m.d.k, m.d_egu.view, m.d_edown.view,
                                    m.d_sgu.view, m.d_sdown.view, y);
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

// y0 + moe_block(h) through the fused decode route against the CPU reference; a second run and
// the dispatcher (ops::moe_block) give the same bits. Returns the device result.
template <typename M>
Tensor check_decode_case(const ops::ExecContext& c, const M& m, int64_t T, uint64_t seed,
                         const std::string& what) {
    const MoeInputs in = moe_inputs(m.d, T, seed);
    const Tensor dh = to_device(c, in.h, DType::BF16);
    const Tensor dlogits = to_device(c, in.logits, DType::F32);
    EXPECT_TRUE(m.fits(dh)) << what;
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

} // namespace ninfer::test
