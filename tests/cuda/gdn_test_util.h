// gated_delta_rule on the CUDA route against the CPU reference, for test_cuda_ops and
// test_cuda_portable_routes: the same inputs on both sides (q, k, v rounded to the activation
// dtype; decays g = -|N(0, decay_scale)|, beta = sigmoid(N(0, 0.5)); an f32 state of 3 slots,
// or one a sequence past 3, taken in reverse order), a ragged batch of `rows` per sequence.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/gated_delta_rule.h"

namespace ninfer::test {

// Inputs are drawn with seeds seed .. seed + 5; `what` names the case in failure messages.
// Returns whether the output and the state both match; with expect = false (a sabotage arm)
// a mismatch is not a failure: the caller checks the result.
inline bool check_gated_delta_rule(const ops::ExecContext& c, int64_t Hk, int64_t Hv, int64_t dk,
                                   int64_t dv, const std::vector<int32_t>& rows,
                                   const Tolerance& tol, ops::GdnAlgo algo, float decay_scale,
                                   uint64_t seed, const std::string& what, bool expect = true) {
    const int64_t T = std::accumulate(rows.begin(), rows.end(), int64_t(0));
    const Tensor q = rounded(random_tensor({T, Hk, dk}, seed), c.dtype);
    const Tensor k = rounded(random_tensor({T, Hk, dk}, seed + 1), c.dtype);
    const Tensor v = rounded(random_tensor({T, Hv, dv}, seed + 2), c.dtype);
    Tensor g = random_tensor({T, Hv}, seed + 3, decay_scale);
    Tensor beta = random_tensor({T, Hv}, seed + 4, 0.5f);
    for (int64_t i = 0; i < g.numel(); ++i) {
        g.ptr<float>()[i] = -std::fabs(g.ptr<float>()[i]);
        beta.ptr<float>()[i] = 1.0f / (1.0f + std::exp(-beta.ptr<float>()[i]));
    }
    const int32_t slots = std::max<int32_t>(3, int32_t(rows.size()));
    const Tensor state = random_tensor({slots, Hv, dk, dv}, seed + 5, 0.1f);
    std::vector<SeqSpec> seqs;
    for (size_t s = 0; s < rows.size(); ++s)
        seqs.push_back({rows[s], int32_t(3 * s), slots - 1 - int32_t(s)});
    DualBatch batch(c, seqs);
    Tensor ref_state = clone(state), ref = zeros({T, Hv, dv});
    ops::gated_delta_rule(kCpuRef, q, k, v, g, beta, batch.host(), ref_state, ref);
    Tensor d_state = to_device(c, state, DType::F32);
    Tensor out = to_device(c, zeros({T, Hv, dv}), c.dtype);
    ops::gated_delta_rule(c, to_device(c, q, c.dtype), to_device(c, k, c.dtype),
                          to_device(c, v, c.dtype), to_device(c, g, DType::F32),
                          to_device(c, beta, DType::F32), batch.device(), d_state, out, algo);
    const bool out_ok = near(to_host(c, out), ref, tol);
    const bool state_ok = near(to_host(c, d_state), ref_state, kCudaF32);
    if (expect) {
        EXPECT_TRUE(out_ok) << what << " dk=" << dk << " dv=" << dv << " T=" << T;
        EXPECT_TRUE(state_ok) << what << " dk=" << dk;
    }
    return out_ok && state_ok;
}

} // namespace ninfer::test
