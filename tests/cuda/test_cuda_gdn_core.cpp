// gdn_core on CUDA (label cuda) at the real shapes: Qwen3.6-35B-A3B (Hk 16, Hv 32) and 27B
// (Hv 48), dk = dv = 128, C = 2 Hk dk + Hv dv, conv kernel 4, in_proj's output as strided column
// views. Decode batches of 1 and 3 sequences (the fused kernel; distinct state slots, nonzero conv
// and recurrent states, one batch with an empty sequence) and prefill batches (5 rows: the op
// composition) are compared with the CPU reference (FP64 composition): core output, conv state and
// recurrent state. The fused kernel is also held to the unfused CUDA ops, whose rounding points it
// keeps, at a much tighter tolerance.
#include <numeric>

#include "cuda/cuda_test_util.h"
#include "cuda/gdn_core_builds.h"
#include "ops/conv1d.h"
#include "ops/gated_delta_rule.h"
#include "ops/gated_rms_norm.h"

namespace ninfer::test {
namespace {

constexpr int64_t kHk = 16, kD = 128, kK = 4;
constexpr float kEps = 1e-6f;
// The fused kernel against the unfused CUDA ops: the same roundings and reduction orders, so
// only an isolated one-ulp flip (a different FMA contraction) may differ.
constexpr Tolerance kSameRoundings{"same_rounding_points", 1e-4, 1e-2};

// One GDN layer on one side (host F32 or device in the activation dtype): in_proj's output
// [T, C + Vd + 2 Hv] = qkv | z | b | a, the weights, both states and the outputs.
struct Layer {
    int64_t T, Hv, C, Vd;
    Tensor proj, conv_w, A_log, dt_bias, norm_w, conv_state, state, conv_out, g, beta, core;

    TensorView qkv() const { return proj.view().narrow(1, 0, C); }
    TensorView z() const { return proj.view().narrow(1, C, Vd); }
    TensorView b() const { return proj.view().narrow(1, C + Vd, Hv); }
    TensorView a() const { return proj.view().narrow(1, C + Vd + Hv, Hv); }

    void run_op(const ops::ExecContext& ctx, const ops::SeqBatch& batch) const {
        ops::gdn_core(ctx, qkv(), z(), b(), a(), conv_w, A_log, dt_bias, norm_w, kEps, batch,
                      conv_state, state, conv_out, g, beta, core);
    }
    // The four ops gdn_core is defined by, called one by one.
    void run_composition(const ops::ExecContext& ctx, const ops::SeqBatch& batch) const {
        ops::causal_conv1d_silu(ctx, qkv(), conv_w, batch, conv_state, conv_out);
        ops::gdn_gates(ctx, a(), b(), A_log, dt_bias, g, beta);
        ops::gated_delta_rule(ctx, conv_out.view().split_heads(0, kHk, kD),
                              conv_out.view().split_heads(kHk * kD, kHk, kD),
                              conv_out.view().split_heads(2 * kHk * kD, Hv, kD), g, beta, batch,
                              state, core);
        ops::gated_rms_norm(ctx, core, z().split_heads(0, Hv, kD), norm_w, kEps, core);
    }
};

// Host inputs rounded through dtype, so the CPU reference sees the device's exact values.
Layer host_layer(int64_t T, int64_t Hv, int64_t slots, DType dtype) {
    const int64_t C = 2 * kHk * kD + Hv * kD, Vd = Hv * kD;
    Tensor norm_w = random_tensor({kD}, 405, 0.2f);
    for (int64_t i = 0; i < kD; ++i) norm_w.ptr<float>()[i] += 1.0f; // HF's ones + noise
    return {T,
            Hv,
            C,
            Vd,
            rounded(random_tensor({T, C + Vd + 2 * Hv}, 400), dtype),
            rounded(random_tensor({C, kK}, 401, 0.4f), dtype),
            rounded(random_tensor({Hv}, 402, 0.5f), dtype),
            rounded(random_tensor({Hv}, 403, 0.5f), dtype),
            rounded(norm_w, dtype),
            rounded(random_tensor({slots, C, kK - 1}, 404), dtype),
            random_tensor({slots, Hv, kD, kD}, 406, 0.1f),
            zeros({T, C}),
            zeros({T, Hv}),
            zeros({T, Hv}),
            zeros({T, Hv, kD})};
}

Layer device_layer(const ops::ExecContext& c, const Layer& h, DType dtype) {
    return {h.T,
            h.Hv,
            h.C,
            h.Vd,
            to_device(c, h.proj, dtype),
            to_device(c, h.conv_w, dtype),
            to_device(c, h.A_log, dtype),
            to_device(c, h.dt_bias, dtype),
            to_device(c, h.norm_w, dtype),
            to_device(c, h.conv_state, dtype),
            to_device(c, h.state, DType::F32),
            to_device(c, h.conv_out, dtype),
            to_device(c, h.g, DType::F32),
            to_device(c, h.beta, DType::F32),
            to_device(c, h.core, dtype)};
}

class CudaGdnCore : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    const Tolerance& out_tol() const { return dt() == DType::F32 ? kCudaF32 : kBf16Reduction; }

    // rows[s] rows for sequence s, at position 3 + 7 s, in slot slots - 1 - s.
    void run(int64_t Hv, const std::vector<int32_t>& rows) const {
        const auto c = cuda_ctx(dt());
        const int64_t T = std::accumulate(rows.begin(), rows.end(), int64_t(0));
        const int64_t slots = int64_t(rows.size()) + 2;
        std::vector<SeqSpec> seqs;
        for (size_t s = 0; s < rows.size(); ++s)
            seqs.push_back({rows[s], int32_t(3 + 7 * s), int32_t(slots - 1 - int64_t(s))});
        DualBatch batch(c, seqs);
        const Layer ref = host_layer(T, Hv, slots, dt());
        const Layer fused = device_layer(c, ref, dt()), unfused = device_layer(c, ref, dt());
        ref.run_op(kCpuRef, batch.host());
        fused.run_op(c, batch.device());
        unfused.run_composition(c, batch.device());
        const std::string what = "Hv=" + std::to_string(Hv) + " T=" + std::to_string(T);
        EXPECT_TRUE(near(to_host(c, fused.core), ref.core, out_tol())) << what;
        EXPECT_TRUE(near(to_host(c, fused.conv_state), ref.conv_state, kExact)) << what;
        EXPECT_TRUE(near(to_host(c, fused.state), ref.state,
                         dt() == DType::F32 ? kCudaF32 : kBf16Reduction))
            << what;
        EXPECT_TRUE(near(to_host(c, fused.core), to_host(c, unfused.core), kSameRoundings)) << what;
        EXPECT_TRUE(near(to_host(c, fused.conv_state), to_host(c, unfused.conv_state), kExact))
            << what;
        EXPECT_TRUE(near(to_host(c, fused.state), to_host(c, unfused.state), kSameRoundings))
            << what;
    }
};

TEST_P(CudaGdnCore, Qwen35BDecodeOneSequence) {
    run(32, {1});
}

TEST_P(CudaGdnCore, Qwen35BDecodeThreeSequences) {
    run(32, {1, 1, 1});
}

TEST_P(CudaGdnCore, Qwen27BDecodeOneSequence) {
    run(48, {1});
}

TEST_P(CudaGdnCore, Qwen27BDecodeThreeSequences) {
    run(48, {1, 1, 1});
}

TEST_P(CudaGdnCore, DecodeWithAnEmptySequence) {
    run(32, {1, 0, 1}); // the empty sequence's states stay as they are
}

// Every build of the fused kernel (gdn_core_variant: the row-group blocks built for one or two
// resident blocks an SM, or the column blocks; the state read after or before the PDL wait) on
// decode batches of one, three and many sequences (blocks of several clusters share each SM), one
// with an empty sequence.
TEST_P(CudaGdnCore, DecodeOnEveryBuild) {
    const std::vector<int32_t> many(300, 1);
    for (const ops::cuda::GdnCoreVariant& want : kGdnCoreBuilds) {
        const ScopedGdnCoreBuild build(want);
        const ops::cuda::GdnCoreVariant v = ops::cuda::gdn_core_variant();
        ASSERT_EQ(v.blocks_per_sm, want.blocks_per_sm);
        ASSERT_EQ(v.early_state, want.early_state);
        ASSERT_EQ(v.columns, want.columns);
        SCOPED_TRACE(gdn_core_build_name(want));
        run(32, {1});
        run(32, {1, 0, 1});
        run(48, {1, 1, 1});
        run(32, many);
        run(48, std::vector<int32_t>(many.begin(), many.begin() + 100));
    }
}

TEST_P(CudaGdnCore, PrefillRunsTheComposition) {
    run(32, {5});
    run(48, {5, 1});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnCore, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
