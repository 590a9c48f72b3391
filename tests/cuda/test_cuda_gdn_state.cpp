// The GDN recurrent state stored in BF16 (--gdn-state-dtype bf16) on every CUDA route that reads
// or writes it (label cuda): the recurrence (decode rows, multi-row chunks, per-row verification
// snapshots), the chunked route (tensor-core form for bf16 activations, the f32 form for f32
// ones) and the fused decode kernel gdn_core. The contract (ops/gated_delta_rule.h): a BF16 state
// is read to f32 and rounded once per store, so from a bf16-exact start a call's outputs equal
// the F32 state's bit for bit and the state it leaves is the F32 run's rounded to nearest even.
// Both runs take the same kernel (the state dtype is a runtime flag), so kExact is the bound; the
// CPU reference with a BF16 state is also held to the bf16 presets, as every route is.
#include <numeric>

#include "cuda/cuda_test_util.h"
#include "cuda/gdn_core_builds.h"
#include "ops/gated_delta_rule.h"

namespace ninfer::test {
namespace {

constexpr int64_t kD = 128, kConvK = 4;

// The problem on the host: F32 tensors, already rounded to the activation dtype.
struct Problem {
    Tensor q, k, v, g, beta, state; // state: bf16-exact values, [slots, Hv, kD, kD]
};

Problem make(DType dt, int64_t T, int64_t Hk, int64_t Hv, int64_t slots, uint64_t seed) {
    Problem p{rounded(random_tensor({T, Hk, kD}, seed), dt),
              rounded(random_tensor({T, Hk, kD}, seed + 1), dt),
              rounded(random_tensor({T, Hv, kD}, seed + 2), dt),
              zeros({T, Hv}),
              zeros({T, Hv}),
              rounded(random_tensor({slots, Hv, kD, kD}, seed + 3, 0.2f), DType::BF16)};
    // Decays e^g of about 0.7-0.98, beta in (0, 1).
    Tensor noise = random_tensor({T, Hv}, seed + 4);
    for (int64_t i = 0; i < T * Hv; ++i) {
        const float n = noise.ptr<float>()[i];
        p.g.ptr<float>()[i] = -0.15f * std::exp(0.5f * n);
        p.beta.ptr<float>()[i] = 1.0f / (1.0f + std::exp(-n));
    }
    return p;
}

class CudaGdnState : public CudaDtypeTest {
protected:
    // Runs gated_delta_rule on the device with an F32 and a BF16 copy of the same state and
    // holds them to the contract; then the BF16 run against the CPU reference with a BF16 state.
    void check(const std::vector<SeqSpec>& seqs, int64_t Hk, int64_t Hv, ops::GdnAlgo algo,
               const std::vector<int32_t>& snapshot_rows = {}) const {
        const auto c = ctx();
        int64_t T = 0, slots = 0;
        for (const SeqSpec& s : seqs) {
            T += s.rows;
            slots = std::max<int64_t>(slots, s.slot + 1);
        }
        for (size_t s = 0; s < snapshot_rows.size(); ++s)
            if (snapshot_rows[s] >= 0)
                slots = std::max<int64_t>(slots, snapshot_rows[s] + seqs[s].rows - 1);
        const Problem p = make(dt(), T, Hk, Hv, slots, 900 + uint64_t(T));
        DualBatch batch(c, seqs);
        ops::SeqBatch device = batch.device();
        Tensor d_snap;
        if (!snapshot_rows.empty()) {
            const Tensor host_rows = [&] {
                Tensor t = zeros({int64_t(snapshot_rows.size())}, DType::I32);
                std::copy(snapshot_rows.begin(), snapshot_rows.end(), t.ptr<int32_t>());
                return t;
            }();
            d_snap = to_device(c, host_rows, DType::I32);
            device.host_snapshot_row = snapshot_rows.data();
            device.snapshot_row = d_snap;
        }
        const Tensor q = to_device(c, p.q, dt()), k = to_device(c, p.k, dt()),
                     v = to_device(c, p.v, dt()), g = to_device(c, p.g, DType::F32),
                     beta = to_device(c, p.beta, DType::F32);
        Tensor st32 = to_device(c, p.state, DType::F32), st16 = to_device(c, p.state, DType::BF16);
        Tensor out32 = to_device(c, zeros({T, Hv, kD}), dt());
        Tensor out16 = to_device(c, zeros({T, Hv, kD}), dt());
        ops::gated_delta_rule(c, q, k, v, g, beta, device, st32, out32, algo);
        ops::gated_delta_rule(c, q, k, v, g, beta, device, st16, out16, algo);
        const Tensor state32 = to_host(c, st32), state16 = to_host(c, st16);
        EXPECT_TRUE(near(to_host(c, out16), to_host(c, out32), kExact));
        EXPECT_TRUE(near(state16, rounded(state32, DType::BF16), kExact));
        EXPECT_FALSE(near(state32, p.state, kExact)) << "the call wrote no state";
        // The CPU reference on a BF16 state (same start, same stores).
        Tensor ref_state =
            Tensor::empty(cpu_allocator(), DType::BF16, p.state.view().shape.data(), 4);
        convert_from_f32(p.state.ptr<float>(), ref_state.view().data, DType::BF16, p.state.numel());
        Tensor ref_out = zeros({T, Hv, kD});
        HostBatch host(seqs);
        if (!snapshot_rows.empty()) host.set_snapshot_rows(snapshot_rows);
        ops::gated_delta_rule(kCpuRef, p.q, p.k, p.v, p.g, p.beta, host, ref_state, ref_out, algo);
        EXPECT_TRUE(near(to_host(c, out16), ref_out, reduction()));
        EXPECT_TRUE(near(state16, clone(ref_state), kBf16Reduction));
    }
};

TEST_P(CudaGdnState, RecurrentDecodeRows) {
    check({{1, 9, 2}, {1, 30, 0}, {0, 4, 1}}, 16, 32, ops::GdnAlgo::Recurrent); // 35B heads
}

TEST_P(CudaGdnState, RecurrentChunks) {
    check({{9, 0, 1}, {1, 40, 0}}, 2, 6, ops::GdnAlgo::Recurrent);
}

TEST_P(CudaGdnState, ChunkedRoute) {
    // bf16 activations: the tensor-core passes; f32: the f32 passes. A tail, a decode row, a
    // fresh and a continued sequence.
    check({{130, 0, 2}, {1, 17, 0}, {70, 64, 1}}, 2, 6, ops::GdnAlgo::Chunked);
}

TEST_P(CudaGdnState, PerRowSnapshots) {
    // Sequence 0 (slot 0) verifies 4 rows into snapshot rows 3..5; sequence 1 (slot 1) has none.
    check({{4, 20, 0}, {1, 8, 1}}, 2, 4, ops::GdnAlgo::Auto, {3, -1});
}

// gdn_core's fused decode kernel (sm_90 clusters; 35B heads), every build: core output and both
// states.
TEST_P(CudaGdnState, FusedGdnCoreDecode) {
    const auto c = ctx();
    const int64_t Hk = 16, Hv = 32, C = 2 * Hk * kD + Hv * kD, Vd = Hv * kD, slots = 4;
    const std::vector<SeqSpec> seqs{{1, 5, 3}, {1, 12, 1}, {1, 40, 0}};
    const int64_t T = 3;
    DualBatch batch(c, seqs);
    const Tensor proj = to_device(c, input({T, C + Vd + 2 * Hv}, 950), dt());
    const Tensor conv_w = to_device(c, input({C, kConvK}, 951, 0.4f), dt());
    const Tensor A_log = to_device(c, input({Hv}, 952, 0.5f), dt());
    const Tensor dt_bias = to_device(c, input({Hv}, 953, 0.5f), dt());
    Tensor norm_host = input({kD}, 954, 0.2f);
    for (int64_t i = 0; i < kD; ++i) norm_host.ptr<float>()[i] += 1.0f;
    const Tensor norm_w = to_device(c, rounded(norm_host, dt()), dt());
    const Tensor conv_start = input({slots, C, kConvK - 1}, 955);
    const Tensor start = rounded(random_tensor({slots, Hv, kD, kD}, 956, 0.1f), DType::BF16);
    struct Side {
        Tensor conv_state, state, conv_out, g, beta, core;
    };
    auto side = [&](DType state_dtype) {
        return Side{
            to_device(c, conv_start, dt()),           to_device(c, start, state_dtype),
            to_device(c, zeros({T, C}), dt()),        to_device(c, zeros({T, Hv}), DType::F32),
            to_device(c, zeros({T, Hv}), DType::F32), to_device(c, zeros({T, Hv, kD}), dt())};
    };
    for (const ops::cuda::GdnCoreVariant& build : kGdnCoreBuilds) { // each keeps the contract
        const ScopedGdnCoreBuild selected(build);
        SCOPED_TRACE(gdn_core_build_name(build));
        Side f32 = side(DType::F32), bf16 = side(DType::BF16);
        for (Side* s : {&f32, &bf16})
            ops::gdn_core(c, proj.view().narrow(1, 0, C), proj.view().narrow(1, C, Vd),
                          proj.view().narrow(1, C + Vd, Hv), proj.view().narrow(1, C + Vd + Hv, Hv),
                          conv_w, A_log, dt_bias, norm_w, 1e-6f, batch.device(), s->conv_state,
                          s->state, s->conv_out, s->g, s->beta, s->core);
        EXPECT_TRUE(near(to_host(c, bf16.core), to_host(c, f32.core), kExact));
        EXPECT_TRUE(near(to_host(c, bf16.conv_state), to_host(c, f32.conv_state), kExact));
        const Tensor state32 = to_host(c, f32.state);
        EXPECT_TRUE(near(to_host(c, bf16.state), rounded(state32, DType::BF16), kExact));
        EXPECT_FALSE(near(state32, start, kExact)) << "the kernel wrote no state";
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnState, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
