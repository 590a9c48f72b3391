// Portable mode (ops/cuda/device_caps.h, label cuda): with it forced, every route chosen by the
// device's compute capability or shared memory takes the way of the least capable GPU of the fat
// binary (no sm_90 features, 99 KB of shared memory per block: sm_86 / sm_89 / sm_120), and each
// runs against the CPU reference:
//   - gdn_core's decode as the op composition (the fused kernel needs thread-block clusters);
//   - linear_fp8 without cuBLASLt's block-scaled W8A8 (sm_90 only): tensor cores, or dequantize
//     + cuBLAS, at shapes that take W8A8 on an H200;
//   - paged_attention's prefill over quantized planes at head dim 256 on the split-K kernel (the
//     tensor-core kernel wants 100 KB there), and over bf16 planes on the tensor-core kernel
//     (exactly 99 KB);
//   - gated_delta_rule's long sequences on the recurrence at dk = dv = 128 (both chunked forms
//     want more than 99 KB) and on the f32 chunked form at smaller heads (bf16 included: the
//     tensor-core form wants 160 KB);
//   - moe_experts' bf16 grouped GEMM on 64-row tiles (128-row tiles want 108 KB);
// and every kernel without programmatic dependent launch. A kernel launched with more shared
// memory than portable mode gives raises (require_shared_memory), so a route that misjudged its
// device fails here even on an H200, whose hardware would run it. Each route check first asserts
// the route portable mode must pick, so a test can never pass on the route it meant to avoid.
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda/fp8_test_util.h"
#include "cuda/gdn_test_util.h"
#include "cuda/kv_planes_test_util.h"
#include "ops/attention.h"
#include "ops/attention_test_util.h"
#include "ops/cuda/attention_flash.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/gated_delta_rule_chunked.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/moe_grouped.h"
#include "ops/gated_delta_rule.h"
#include "ops/kv_cache.h"
#include "ops/linear.h"
#include "ops/moe.h"

namespace ninfer::test {
namespace {

namespace cuda = ops::cuda;

// Every test runs in portable mode, and leaves the process as it found it.
class PortableRoutes : public ::testing::Test {
protected:
    void SetUp() override {
        was_portable_ = cuda::portable_kernels();
        cuda::set_portable_kernels(true);
    }
    void TearDown() override { cuda::set_portable_kernels(was_portable_); }

private:
    bool was_portable_ = false;
};

TEST_F(PortableRoutes, DeviceLooksLikeTheLeastCapableGpuOfTheBuild) {
    const auto c = cuda_ctx(DType::BF16);
    const cuda::DeviceCaps caps = cuda::device_caps(c.device.index);
    EXPECT_LE(caps.arch, cuda::kPortableArch);
    EXPECT_GT(caps.code_arch, 0) << "the build has no image for this device";
    EXPECT_LE(caps.code_arch, cuda::kPortableArch);
    EXPECT_GT(caps.sm_count, 0);
    EXPECT_EQ(caps.smem_per_block, cuda::kPortableSmemPerBlock);
    EXPECT_FALSE(cuda::has_sm90_features(c.device.index));
    EXPECT_FALSE(cuda::has_block_scaled_fp8_matmul(c.device.index));
    EXPECT_TRUE(cuda::shared_memory_fits(c.device.index, size_t(cuda::kPortableSmemPerBlock)));
    EXPECT_FALSE(cuda::shared_memory_fits(c.device.index, size_t(cuda::kPortableSmemPerBlock) + 1));
    // Off again, the device's own answers (the GPUs the build is for have at least sm_80's).
    cuda::set_portable_kernels(false);
    const cuda::DeviceCaps native = cuda::device_caps(c.device.index);
    cuda::set_portable_kernels(true);
    EXPECT_GE(native.arch, 80);
    EXPECT_GE(native.smem_per_block, cuda::kPortableSmemPerBlock);
    EXPECT_EQ(native.sm_count, caps.sm_count);
}

// --- gdn_core: the composition instead of the clustered kernel ---

constexpr int64_t kD = 128, kConvK = 4;

TEST_F(PortableRoutes, GdnCoreDecodeRunsTheComposition) {
    for (DType dt : {DType::F32, DType::BF16}) {
        const auto c = cuda_ctx(dt);
        const int64_t Hk = 2, Hv = 4, C = 2 * Hk * kD + Hv * kD, Vd = Hv * kD, slots = 4;
        const std::vector<int32_t> rows{1, 0, 1}; // decode rows and an empty sequence
        std::vector<SeqSpec> seqs;
        for (size_t s = 0; s < rows.size(); ++s)
            seqs.push_back({rows[s], int32_t(3 + 7 * s), int32_t(slots - 1 - int64_t(s))});
        DualBatch batch(c, seqs);
        const int64_t T = batch.host().num_rows;
        auto in = [&](std::initializer_list<int64_t> dims, uint64_t seed, float scale) {
            return rounded(random_tensor(dims, seed, scale), dt);
        };
        const Tensor proj = in({T, C + Vd + 2 * Hv}, 500, 1.0f),
                     conv_w = in({C, kConvK}, 501, 0.4f);
        const Tensor A_log = in({Hv}, 502, 0.5f), dt_bias = in({Hv}, 503, 0.5f);
        Tensor norm_w = random_tensor({kD}, 504, 0.2f);
        for (int64_t i = 0; i < kD; ++i) norm_w.ptr<float>()[i] += 1.0f;
        norm_w = rounded(norm_w, dt);
        const Tensor conv_state = in({slots, C, kConvK - 1}, 505, 1.0f);
        const Tensor state = random_tensor({slots, Hv, kD, kD}, 506, 0.1f);
        const TensorView p = proj.view();
        const TensorView qkv = p.narrow(1, 0, C), z = p.narrow(1, C, Vd),
                         b = p.narrow(1, C + Vd, Hv), a = p.narrow(1, C + Vd + Hv, Hv);
        Tensor r_conv = clone(conv_state), r_state = clone(state), r_core = zeros({T, Hv, kD});
        Tensor r_out = zeros({T, C}), r_g = zeros({T, Hv}), r_beta = zeros({T, Hv});
        ops::gdn_core(kCpuRef, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, 1e-6f, batch.host(),
                      r_conv, r_state, r_out, r_g, r_beta, r_core);

        const Tensor d_proj = to_device(c, proj, dt), d_conv_w = to_device(c, conv_w, dt);
        Tensor d_conv = to_device(c, conv_state, dt), d_state = to_device(c, state, DType::F32);
        Tensor d_core = to_device(c, zeros({T, Hv, kD}), dt),
               d_out = to_device(c, zeros({T, C}), dt);
        Tensor d_g = to_device(c, zeros({T, Hv}), DType::F32),
               d_beta = to_device(c, zeros({T, Hv}), DType::F32);
        const std::string what = std::string("gdn_core ") + dtype_name(dt);
        ASSERT_FALSE(cuda::gdn_core_fused_fits(batch.device(), d_conv_w, d_state, Hk)) << what;
        const TensorView dp = d_proj.view();
        ops::gdn_core(c, dp.narrow(1, 0, C), dp.narrow(1, C, Vd), dp.narrow(1, C + Vd, Hv),
                      dp.narrow(1, C + Vd + Hv, Hv), d_conv_w, to_device(c, A_log, dt),
                      to_device(c, dt_bias, dt), to_device(c, norm_w, dt), 1e-6f, batch.device(),
                      d_conv, d_state, d_out, d_g, d_beta, d_core);
        const Tolerance& tol = dt == DType::F32 ? kCudaF32 : kBf16Reduction;
        EXPECT_TRUE(near(to_host(c, d_core), r_core, tol)) << what;
        EXPECT_TRUE(near(to_host(c, d_conv), r_conv, kExact)) << what;
        EXPECT_TRUE(near(to_host(c, d_state), r_state, tol)) << what;
    }
}

// --- linear_fp8 without W8A8 ---

// linear (the dispatcher) over an fp8 weight [N, K] with 128 x 128 blocks at T rows, after
// checking the route portable mode gives the shape, against the CPU reference on the exact weight
// (the GEMV's f32 code x scale) or on the weight rounded to bf16 (what the tensor-core and
// dequantize routes multiply).
void check_fp8_linear(int64_t T, int64_t K, int64_t N, cuda::Fp8LinearRoute expected) {
    const auto c = cuda_ctx(DType::BF16);
    const uint64_t seed = uint64_t(T * 7919 + K * 31 + N);
    const Tensor x = rounded(random_tensor({T, K}, seed, 1.0f), DType::BF16);
    const HostFp8 w({N, K}, 128, 128, seed + 1, Fp8Codes::Normal, 0.001f, 0.01f);
    const Tensor y0 = rounded(random_tensor({T, N}, seed + 2, 4.0f), DType::BF16);
    Tensor ref = clone(y0);
    const bool gemv = expected == cuda::Fp8LinearRoute::Gemv;
    ops::linear(kCpuRef, x, gemv ? w.dense() : rounded(w.dense(), DType::BF16), ref, true);
    const Tensor dx = to_device(c, x, DType::BF16);
    const DeviceFp8 dw(c, w);
    Tensor dy = to_device(c, y0, DType::BF16);
    const std::string what =
        "fp8 linear T=" + std::to_string(T) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
    ASSERT_FALSE(cuda::linear_w8a8_fits(dx, dw.view, dy)) << what;
    ASSERT_EQ(int(cuda::linear_fp8_route(dx, dw.view, dy)), int(expected)) << what;
    EXPECT_THROW(cuda::linear_w8a8(c, dx, dw.view, dy, true), Error) << what;
    ops::linear(c, dx, dw.view, dy, true);
    EXPECT_TRUE(near(to_host(c, dy), ref, kBf16Reduction)) << what;
}

TEST_F(PortableRoutes, Fp8LinearWithoutTheBlockScaledMatmul) {
    using Route = cuda::Fp8LinearRoute;
    // A large weight (16 Mi elements) from kFp8W8a8MinRows rows: W8A8 on an H200.
    check_fp8_linear(cuda::kFp8W8a8MinRows, 4096, 4096, Route::TensorCores);
    check_fp8_linear(64, 4096, 4096, Route::TensorCores);
    // A small weight past the tensor-core rows: W8A8 on an H200, dequantize + cuBLAS here.
    check_fp8_linear(cuda::kFp8TensorCoreMaxRows + 72, 512, 256, Route::Dequantize);
    // The GEMV's rows are the same route everywhere.
    check_fp8_linear(3, 4096, 4096, Route::Gemv);
}

// --- paged_attention prefill at head dim 256 ---

// paged_attention over prompt chunks (after cached contexts) of bf16 queries over the same planes
// on both sides; `flash` is the route portable mode must give the batch.
void check_prefill(ops::KvDtype kv, bool flash) {
    const auto c = cuda_ctx(DType::BF16);
    const AttnDims d{8, 2, 256};
    std::vector<SeqSpec> seqs{{40, 0, 0}, {ops::cuda::kFlashMinRows + 3, 37, 1}};
    int32_t NB = 2;
    for (const SeqSpec& s : seqs) NB += (s.pos_begin + s.rows + kBlock - 1) / kBlock;
    seqs = with_blocks(seqs, NB, 610);
    DualBatch batch(c, seqs, kBlock);
    const Planes host = host_planes(kv, NB, d.nKV, d.D, 611);
    const Planes dev = planes_to_device(c, host);
    const int64_t T = batch.host().num_rows;
    const Tensor q = rounded(random_tensor({T, d.nH, d.D}, 612, 1.0f), DType::BF16);
    const Tensor dq = to_device(c, q, DType::BF16);
    Tensor out = to_device(c, zeros({T, d.nH, d.D}), DType::BF16);
    const std::string what = std::string("prefill D=256 kv ") + ops::kv_dtype_name(kv, DType::BF16);
    ASSERT_EQ(cuda::flash_prefill_supported(dq, dev.kp(), dev.vp(), out), flash) << what;
    const float scale = 1.0f / std::sqrt(float(d.D));
    ops::paged_attention(c, dq, dev.kp(), dev.vp(), batch.device(), scale, out);
    Tensor ref = zeros({T, d.nH, d.D});
    ops::paged_attention(kCpuRef, q, host.kp(), host.vp(), batch.host(), scale, ref);
    EXPECT_TRUE(near(to_host(c, out), ref, kBf16Reduction)) << what;
}

TEST_F(PortableRoutes, QuantizedPrefillAtHeadDim256TakesTheSplitKKernel) {
    check_prefill(ops::KvDtype::Int8, false);
    check_prefill(ops::KvDtype::Fp8, false);
}

TEST_F(PortableRoutes, Bf16PrefillAtHeadDim256KeepsTheTensorCoreKernel) {
    check_prefill(ops::KvDtype::Activation, true); // 99 KB: fits exactly
}

// --- gated_delta_rule's long sequences ---

// gated_delta_rule on both sides (gdn_test_util.h); `chunked` is whether portable
// mode keeps the chunked route for the shape.
void check_gdn(DType dt, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv,
               const std::vector<int32_t>& rows, ops::GdnAlgo algo, bool chunked) {
    const auto c = cuda_ctx(dt);
    cuda::GdnArgs args{};
    args.dk = int(dk);
    args.dv = int(dv);
    const std::string what = std::string("gdn ") + dtype_name(dt) + " dk=" + std::to_string(dk) +
                             " dv=" + std::to_string(dv) + " algo=" + std::to_string(int(algo));
    // F32 runs the f32 form only; bf16 would add the tensor-core form, which never fits 99 KB.
    ASSERT_EQ(cuda::gated_delta_rule_chunked_fits<float>(c, args), chunked) << what;
    check_gated_delta_rule(c, Hk, Hv, dk, dv, rows, dt == DType::F32 ? kCudaF32 : kBf16Reduction,
                           algo, 0.3f, 620, what);
}

TEST_F(PortableRoutes, GatedDeltaRuleLongSequences) {
    const int32_t b = cuda::kGdnChunkedMinRows;
    for (DType dt : {DType::F32, DType::BF16}) {
        // The real heads: the recurrence, for Auto and for an explicit Chunked.
        check_gdn(dt, 2, 4, 128, 128, {2 * b + 6, 1}, ops::GdnAlgo::Auto, false);
        check_gdn(dt, 2, 4, 128, 128, {b + 1}, ops::GdnAlgo::Chunked, false);
        // Smaller heads: the f32 chunked form (64 KB), bf16 activations too.
        check_gdn(dt, 2, 4, 64, 32, {130, 1}, ops::GdnAlgo::Auto, true);
    }
}

// --- moe_experts' bf16 grouped GEMM ---

TEST_F(PortableRoutes, MoeBf16GroupedGemmOn64RowTiles) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t T = 300, E = 16, H = 128, I = 64, k = 8; // 2400 pairs: 128-row tiles on an H200
    ASSERT_EQ(cuda::grouped_tile_rows_bf16(c, T * k, E), 64);
    Tensor ids = zeros({T, k}, DType::I32), weights = zeros({T, k});
    ops::moe_route(kCpuRef, random_tensor({T, E}, 630, 2.0f), k, weights, ids);
    auto in = [](std::initializer_list<int64_t> dims, uint64_t seed, float scale) {
        return rounded(random_tensor(dims, seed, scale), DType::BF16);
    };
    const Tensor x = in({T, H}, 631, 1.0f), gu = in({E, 2 * I, H}, 632, 0.05f);
    const Tensor down = in({E, H, I}, 633, 0.05f), y0 = in({T, H}, 634, 1.0f);
    Tensor ref = clone(y0);
    ops::moe_experts(kCpuRef, x, gu, down, ids, weights, ref);
    Tensor dy = to_device(c, y0, DType::BF16);
    ops::moe_experts(c, to_device(c, x, DType::BF16), to_device(c, gu, DType::BF16),
                     to_device(c, down, DType::BF16), to_device(c, ids, DType::I32),
                     to_device(c, weights, DType::F32), dy);
    EXPECT_TRUE(near(to_host(c, dy), ref, kBf16Reduction));
}

} // namespace
} // namespace ninfer::test
