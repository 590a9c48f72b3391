// Every CUDA op route against the CPU reference (label cuda): F32 and BF16, T = 1, tails,
// real model shapes, and each route boundary b-1 / b / b+1 (MoE GEMV <= 64 pairs, GDN key dim
// template sizes 32 / 64 / 128).
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "cuda/cuda_test_util.h"
#include "cuda/gdn_test_util.h"
#include "ops/attention.h"
#include "ops/conv1d.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/gated_delta_rule_chunked.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gated_delta_rule.h"
#include "ops/gated_rms_norm.h"
#include "ops/linear.h"
#include "ops/logits.h"
#include "ops/moe.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/sampling.h"

namespace ninfer::test {
namespace {

class CudaOps : public CudaDtypeTest {};

TEST_P(CudaOps, RmsNormAndGatedNorm) {
    const auto c = ctx();
    // Head widths (64, 128, 256: a warp a row; 200: a block a row, two elements a thread), widths
    // for each register-resident size (4, 8, 16 a thread: 2048, 3000, 5120) and past them (9000:
    // the row read twice).
    for (int64_t T : {1, 3, 65, 300}) {
        for (int64_t H : {64, 128, 200, 256, 2048, 3000, 5120, 9000}) {
            Tensor x = input({T, H}, 1, 3.0f), w = input({H}, 2, 0.2f);
            Tensor ref = zeros({T, H});
            ops::rms_norm(kCpuRef, x, w, 1e-6f, ref);
            Tensor dx = to_device(c, x, dt()), dw = to_device(c, w, dt());
            Tensor dy = to_device(c, zeros({T, H}), dt());
            ops::rms_norm(c, dx, dw, 1e-6f, dy);
            EXPECT_TRUE(near(to_host(c, dy), ref, elementwise())) << "T=" << T << " H=" << H;
        }
    }
    // Rows a warp's block does not fill (9 x 4 = 36 = 4 x 8 + 4), and the 35B's prefill layout
    // (65 tokens x 32 heads).
    for (auto [T, Hv] : std::vector<std::pair<int64_t, int64_t>>{{9, 4}, {65, 32}}) {
        for (int64_t dv : {64, 128, 200, 256}) {
            Tensor x = input({T, Hv, dv}, 3, 2.0f), z = input({T, Hv, dv}, 4, 2.0f);
            Tensor w = input({dv}, 5), ref = zeros({T, Hv, dv});
            ops::gated_rms_norm(kCpuRef, x, z, w, 1e-6f, ref);
            Tensor dx = to_device(c, x, dt()), dz = to_device(c, z, dt()), dw = to_device(c, w, dt());
            ops::gated_rms_norm(c, dx, dz, dw, 1e-6f, dx);
            // The kernel rounds the normalised value to the activation dtype first, as HF does.
            EXPECT_TRUE(near(to_host(c, dx), ref, reduction())) << "T=" << T << " dv=" << dv;
        }
    }
}

TEST_P(CudaOps, LinearOverwriteAccumulateAndF32Output) {
    const auto c = ctx();
    struct Shape {
        int64_t T, K, N;
    };
    for (Shape s : {Shape{1, 2048, 512}, {7, 2048, 8192}, {64, 5120, 1024}, {300, 512, 257}}) {
        Tensor x = input({s.T, s.K}, 10, 1.0f), w = input({s.N, s.K}, 11, 0.02f);
        Tensor y0 = input({s.T, s.N}, 12, 1.0f);
        Tensor ref = clone(y0);
        ops::linear(kCpuRef, x, w, ref, /*accumulate=*/true);
        Tensor dx = to_device(c, x, dt()), dw = to_device(c, w, dt());
        Tensor dy = to_device(c, y0, dt());
        ops::linear(c, dx, dw, dy, true);
        EXPECT_TRUE(near(to_host(c, dy), ref, reduction())) << "T=" << s.T << " N=" << s.N;
        Tensor ref2 = zeros({s.T, s.N});
        ops::linear(kCpuRef, x, w, ref2, false);
        Tensor dy32 = to_device(c, zeros({s.T, s.N}), DType::F32); // router / head logits
        ops::linear(c, dx, dw, dy32, false);
        EXPECT_TRUE(near(to_host(c, dy32), ref2, dt() == DType::F32 ? kCudaF32 : kBf16Elementwise));
    }
}

TEST_P(CudaOps, Elementwise) {
    const auto c = ctx();
    // Under one column tile (1,024), several with a tail, the 27B's MLP row; and more rows than a
    // grid's 65,535 (the row loop).
    for (auto [T, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1000}, {33, 1000}, {1, 17408}, {5, 2500}, {70000, 8}}) {
        Tensor a = input({T, N}, 20, 2.0f), b = input({T, N}, 21, 2.0f);
        Tensor gu = input({T, 2 * N}, 22, 2.0f);
        Tensor r_add = zeros({T, N}), r_sig = zeros({T, N}), r_silu = zeros({T, N});
        ops::add(kCpuRef, a, b, r_add);
        ops::sigmoid_mul(kCpuRef, a, b, r_sig);
        ops::silu_mul(kCpuRef, gu, r_silu);
        Tensor da = to_device(c, a, dt()), db = to_device(c, b, dt()), dgu = to_device(c, gu, dt());
        Tensor o1 = to_device(c, zeros({T, N}), dt()), o2 = to_device(c, zeros({T, N}), dt());
        Tensor o3 = to_device(c, zeros({T, N}), dt());
        ops::add(c, da, db, o1);
        ops::sigmoid_mul(c, da, db, o2);
        ops::silu_mul(c, dgu, o3);
        EXPECT_TRUE(near(to_host(c, o1), r_add, elementwise()));
        EXPECT_TRUE(near(to_host(c, o2), r_sig, elementwise()));
        EXPECT_TRUE(near(to_host(c, o3), r_silu, elementwise()));
    }
}

// The attention output gate as the model runs it: in place over [T, heads, 256] with the gate a
// strided head view of the projection (the warp-per-row route for rows of <= 256; 257 takes the
// tile route), more rows than one grid row count when T * heads > 65,535.
TEST_P(CudaOps, SigmoidMulInPlaceOverHeadViews) {
    const auto c = ctx();
    for (auto [T, D] :
         std::vector<std::pair<int64_t, int64_t>>{{3, 256}, {17000, 256}, {5, 200}, {4, 257}}) {
        const int64_t nH = 4;
        Tensor attn = input({T, nH, D}, 23, 2.0f), proj = input({T, nH, 2 * D}, 24, 2.0f);
        Tensor ref = zeros({T, nH, D});
        ops::sigmoid_mul(kCpuRef, attn, proj.view().narrow(2, D, D), ref);
        Tensor da = to_device(c, attn, dt()), dp = to_device(c, proj, dt());
        ops::sigmoid_mul(c, da, dp.view().narrow(2, D, D), da);
        EXPECT_TRUE(near(to_host(c, da), ref, elementwise())) << "T=" << T << " D=" << D;
    }
}

TEST_P(CudaOps, EmbeddingGather) {
    const auto c = ctx();
    Tensor table = input({300, 96}, 30);
    Tensor ids = zeros({5}, DType::I32);
    for (int i = 0; i < 5; ++i) ids.ptr<int32_t>()[i] = (i * 71) % 300;
    Tensor ref = zeros({5, 96});
    ops::embedding(kCpuRef, ids, table, ref);
    Tensor out = to_device(c, zeros({5, 96}), dt());
    ops::embedding(c, to_device(c, ids, dt()), to_device(c, table, dt()), out);
    EXPECT_TRUE(near(to_host(c, out), ref, kExact));
}

TEST_P(CudaOps, Conv1dRaggedWithCarriedState) {
    const auto c = ctx();
    // 16-byte rows (8192; 300 in f32) take the vector kernel, the others one channel a thread.
    for (int64_t C : {300, 301, 8192}) {
        const int64_t K = 4;
        Tensor w = input({C, K}, 40, 0.3f);
        Tensor state = input({3, C, K - 1}, 41);
        // Two sequences (slots 2 and 0) then their continuation in a second call.
        for (auto rows : {std::vector<int32_t>{5, 1}, std::vector<int32_t>{70, 2},
                          std::vector<int32_t>{129, 64}}) { // 64-row chunks: tails, 3 chunks
            const int64_t T = rows[0] + rows[1];
            Tensor x = input({T, C}, 42 + T);
            Tensor ref_state = clone(state), ref = zeros({T, C});
            DualBatch batch(c, {{rows[0], 0, 2}, {rows[1], 7, 0}});
            ops::causal_conv1d_silu(kCpuRef, x, w, batch.host(), ref_state, ref);
            Tensor d_state = to_device(c, state, dt());
            Tensor dy = to_device(c, zeros({T, C}), dt());
            ops::causal_conv1d_silu(c, to_device(c, x, dt()), to_device(c, w, dt()), batch.device(),
                                    d_state, dy);
            EXPECT_TRUE(near(to_host(c, dy), ref, reduction())) << "C=" << C << " T=" << T;
            EXPECT_TRUE(near(to_host(c, d_state), ref_state, kExact)) << "C=" << C;
        }
    }
}

TEST_P(CudaOps, GdnGates) {
    const auto c = ctx();
    const int64_t T = 17, Hv = 32;
    Tensor a = input({T, Hv}, 50, 10.0f), b = input({T, Hv}, 51, 3.0f);
    Tensor A_log = input({Hv}, 52), dt_bias = input({Hv}, 53);
    Tensor g = zeros({T, Hv}), beta = zeros({T, Hv});
    ops::gdn_gates(kCpuRef, a, b, A_log, dt_bias, g, beta);
    Tensor dg = to_device(c, zeros({T, Hv}), DType::F32),
           dbeta = to_device(c, zeros({T, Hv}), DType::F32);
    ops::gdn_gates(c, to_device(c, a, dt()), to_device(c, b, dt()), to_device(c, A_log, dt()),
                   to_device(c, dt_bias, dt()), dg, dbeta);
    EXPECT_TRUE(near(to_host(c, dg), g, kCudaF32));
    EXPECT_TRUE(near(to_host(c, dbeta), beta, elementwise()));
}

void check_gdn(const CudaOps& t, const ops::ExecContext& c, int64_t Hk, int64_t Hv, int64_t dk,
               int64_t dv, std::vector<int32_t> rows, const Tolerance& tol,
               ops::GdnAlgo algo = ops::GdnAlgo::Auto, float decay_scale = 0.3f) {
    check_gated_delta_rule(c, Hk, Hv, dk, dv, rows, tol, algo, decay_scale, 60, "gdn");
}

TEST_P(CudaOps, GatedDeltaRuleRoutesAndBoundaries) {
    const auto c = ctx();
    // Key dim template sizes: 32 | 64 | 128 (b-1, b, b+1 around 32 and 64).
    for (int64_t dk : {16, 31, 32, 33, 63, 64, 65, 128})
        check_gdn(*this, c, 2, 4, dk, 32, {1, 9}, reduction());
    check_gdn(*this, c, 16, 32, 128, 128, {1}, reduction());        // 35B decode shape
    check_gdn(*this, c, 16, 48, 128, 128, {70, 1, 5}, reduction()); // 27B ratio 3, ragged
    check_gdn(*this, c, 2, 2, 16, 40, {3, 4}, reduction());         // dv not a multiple of 32
}

TEST_P(CudaOps, GatedDeltaRuleChunkedRoute) {
    const auto c = ctx();
    const int32_t b = ops::cuda::kGdnChunkedMinRows;
    // Auto's boundary (recurrent below, chunked from b), the 64-row chunk boundary, ragged
    // batches with decode rows, the real shapes, and the explicit chunked route for short rows.
    for (int32_t rows : {b - 1, b, b + 1, 63, 64, 65, 129})
        check_gdn(*this, c, 2, 4, 64, 32, {rows}, reduction());
    check_gdn(*this, c, 16, 32, 128, 128, {200, 1}, reduction());    // 35B
    check_gdn(*this, c, 16, 48, 128, 128, {1, 130, 7}, reduction()); // 27B
    check_gdn(*this, c, 2, 2, 16, 40, {1, 3, 70}, reduction(), ops::GdnAlgo::Chunked);
    // Strong decay: e^G underflows inside a chunk; the state must fade, not turn NaN.
    check_gdn(*this, c, 2, 4, 32, 32, {150}, reduction(), ops::GdnAlgo::Chunked, 30.0f);
}

// A ragged batch with heads enough for the tensor-core scan's 8-warp blocks (bf16: sequences x
// heads >= twice the SMs, the default), and the same batch on its 4-warp blocks
// (NINFER_GDN_SCAN_WIDE=0), which the shapes above run.
TEST_P(CudaOps, GatedDeltaRuleChunkedManySequences) {
    const auto c = ctx();
    const int Hv = 32;
    const int seqs = (2 * ops::cuda::device_caps(c.device.index).sm_count + Hv - 1) / Hv;
    const int32_t pattern[] = {70, 1, 130, 64, 33, 200, 5, 65, 128};
    std::vector<int32_t> rows;
    for (int i = 0; i < seqs; ++i) rows.push_back(pattern[i % 9]);
    for (bool wide : {true, false}) {
        setenv("NINFER_GDN_SCAN_WIDE", wide ? "1" : "0", 1);
        if (dt() == DType::BF16) {
            EXPECT_EQ(ops::cuda::gdn_tc_scan_warps(c, seqs, Hv), wide ? 8 : 4);
        }
        check_gdn(*this, c, 16, Hv, 128, 128, rows, reduction());
        unsetenv("NINFER_GDN_SCAN_WIDE");
    }
}

// The dk-split scan blocks (the default for the 4-warp cases where they fit: 8 warps on 64 state
// columns, each with half of the state rows) and the 4-warp blocks they replace
// (NINFER_GDN_SCAN_SPLIT_DK=0), on the chunked route's shapes, every one a 4-warp case: key dims
// within the lower half, filling it, and past it; value columns short of a block; the real
// heads; strong decay. The split's sabotage arm (the lower half drops the upper half's Qr S
// partial) must be caught, which also shows the split ran. A device without the blocks' 208 KiB
// of shared memory must decline them, and then runs the 4-warp blocks only.
TEST_P(CudaOps, GatedDeltaRuleChunkedSplitDk) {
    const auto c = ctx();
    ScopedEnv restore("NINFER_GDN_SCAN_SPLIT_DK");
    const bool fits = ops::cuda::shared_memory_fits(c.device.index, 208 * 1024);
    const auto shapes = [&] {
        const auto one = [&](int64_t Hk, int64_t Hv, int64_t dk, int64_t dv,
                             std::vector<int32_t> rows, float decay_scale = 0.3f) {
            EXPECT_EQ(ops::cuda::gdn_tc_scan_warps(c, int(rows.size()), int(Hv)), 4);
            check_gdn(*this, c, Hk, Hv, dk, dv, rows, reduction(), ops::GdnAlgo::Chunked,
                      decay_scale);
        };
        for (int64_t dk : {16, 64, 72, 128}) one(2, 4, dk, 32, {70, 9});
        one(16, 32, 128, 128, {200, 1});    // 35B
        one(16, 48, 128, 128, {1, 130, 7}); // 27B
        one(2, 2, 16, 40, {1, 3, 70});
        one(2, 4, 32, 32, {150}, 30.0f); // strong decay
    };
    unsetenv("NINFER_GDN_SCAN_SPLIT_DK");
    EXPECT_EQ(ops::cuda::gdn_tc_scan_split_dk(c), fits ? 1 : 0) << "the default";
    shapes();
    setenv("NINFER_GDN_SCAN_SPLIT_DK", "0", 1);
    EXPECT_EQ(ops::cuda::gdn_tc_scan_split_dk(c), 0);
    shapes();
    if (!fits || dt() != DType::BF16) return; // F32 activations take the f32 route: no split
    setenv("NINFER_GDN_SCAN_SPLIT_DK", "sabotage", 1);
    EXPECT_EQ(ops::cuda::gdn_tc_scan_split_dk(c), 2);
    EXPECT_FALSE(check_gated_delta_rule(c, 16, 32, 128, 128, {200}, reduction(),
                                        ops::GdnAlgo::Chunked, 0.3f, 60, "split sabotage", false))
        << "the split scan's sabotage arm went unnoticed";
}

TEST_P(CudaOps, RopePartialAndLongPositions) {
    const auto c = ctx();
    for (auto [D, rot] : {std::pair<int64_t, int64_t>{256, 64}, {32, 8}, {64, 64}}) {
        const int64_t T = 5, heads = 4;
        Tensor x = input({T, heads, D}, 70);
        Tensor pos = zeros({T}, DType::I32);
        for (int i = 0; i < T; ++i) pos.ptr<int32_t>()[i] = i * 25000 + 3;
        Tensor ref = clone(x);
        ops::rope(kCpuRef, ref, pos, rot, 1e7);
        Tensor dx = to_device(c, x, dt());
        ops::rope(c, dx, to_device(c, pos, dt()), rot, 1e7);
        EXPECT_TRUE(near(to_host(c, dx), ref, elementwise())) << "D=" << D;
    }
}

TEST_P(CudaOps, PagedAttentionMixedBatch) {
    const auto c = ctx();
    for (auto [nH, nKV, D] :
         {std::tuple<int64_t, int64_t, int64_t>{16, 2, 256}, {4, 4, 64}, {6, 2, 96}}) {
        const int32_t bs = 16, NB = 40;
        // Sequence 0 decodes at position 300 (context cached); sequence 1 prefills 40 rows.
        std::vector<int32_t> blocks0, blocks1;
        for (int i = 0; i < 19; ++i) blocks0.push_back(NB - 1 - 2 * i);
        for (int i = 0; i < 3; ++i) blocks1.push_back(2 * i); // even ids: disjoint from seq 0
        DualBatch batch(c, {{1, 300, 0, blocks0}, {40, 0, 1, blocks1}}, bs);
        const int64_t T = 41;
        Tensor kc = input({NB, bs, nKV, D}, 80), vc = input({NB, bs, nKV, D}, 81);
        Tensor q = input({T, nH, D}, 82), k = input({T, nKV, D}, 83), v = input({T, nKV, D}, 84);
        Tensor rk = clone(kc), rv = clone(vc), ref = zeros({T, nH, D});
        ops::kv_cache_write(kCpuRef, k, v, batch.host(), rk, rv);
        ops::paged_attention(kCpuRef, q, rk, rv, batch.host(), 0.0625f, ref);
        Tensor dkc = to_device(c, kc, dt()), dvc = to_device(c, vc, dt());
        ops::kv_cache_write(c, to_device(c, k, dt()), to_device(c, v, dt()), batch.device(), dkc,
                            dvc);
        Tensor out = to_device(c, zeros({T, nH, D}), dt());
        ops::paged_attention(c, to_device(c, q, dt()), dkc, dvc, batch.device(), 0.0625f, out);
        EXPECT_TRUE(near(to_host(c, dkc), rk, kExact));
        EXPECT_TRUE(near(to_host(c, out), ref, reduction())) << "nH=" << nH << " D=" << D;
    }
}

TEST_P(CudaOps, PagedAttentionSplitKDecode) {
    // Few rows, long contexts: the key range splits across blocks (flash-decoding) and merges.
    const auto c = ctx();
    const int64_t nH = 16, nKV = 2, D = 256;
    const int32_t bs = 16, NB = 400;
    std::vector<int32_t> blocks0, blocks1;
    for (int i = 0; i < 188; ++i) blocks0.push_back(2 * i);   // context 3000
    for (int i = 0; i < 8; ++i) blocks1.push_back(2 * i + 1); // context 128
    DualBatch batch(c, {{1, 2999, 0, blocks0}, {1, 127, 1, blocks1}}, bs);
    Tensor kc = input({NB, bs, nKV, D}, 85), vc = input({NB, bs, nKV, D}, 86);
    Tensor q = input({2, nH, D}, 87);
    Tensor ref = zeros({2, nH, D});
    ops::paged_attention(kCpuRef, q, kc, vc, batch.host(), 0.0625f, ref);
    Tensor out = to_device(c, zeros({2, nH, D}), dt());
    ops::paged_attention(c, to_device(c, q, dt()), to_device(c, kc, dt()), to_device(c, vc, dt()),
                         batch.device(), 0.0625f, out);
    EXPECT_TRUE(near(to_host(c, out), ref, reduction()));
}

TEST_P(CudaOps, MoeRouteExpertsAroundTheGemvBoundary) {
    const auto c = ctx();
    struct Case {
        int64_t T, E, k, I, H;
    };
    // k = 8: T = 7, 8, 9 give 56, 64 (GEMV) and 72 (grouped) pairs; then real shapes.
    // The 35B router shape (E = 256, k = 8) with smaller expert matrices, the real expert
    // matrices (I = 512, H = 2048) with fewer experts: the host reference stays quick.
    for (Case s : {Case{7, 16, 8, 64, 128},
                   {8, 16, 8, 64, 128},
                   {9, 16, 8, 64, 128},
                   {1, 256, 8, 32, 128},
                   {33, 256, 8, 32, 128},
                   {2, 16, 8, 512, 2048},
                   {300, 8, 2, 48, 64}}) {
        Tensor logits = random_tensor({s.T, s.E}, 90, 2.0f);
        Tensor w_ref = zeros({s.T, s.k}), id_ref = zeros({s.T, s.k}, DType::I32);
        ops::moe_route(kCpuRef, logits, s.k, w_ref, id_ref);
        Tensor dw = to_device(c, zeros({s.T, s.k}), DType::F32);
        Tensor did = to_device(c, zeros({s.T, s.k}, DType::I32), DType::I32);
        ops::moe_route(c, to_device(c, logits, DType::F32), s.k, dw, did);
        EXPECT_TRUE(near(to_host(c, did), id_ref, kExact)) << "E=" << s.E;
        EXPECT_TRUE(near(to_host(c, dw), w_ref, kCudaF32));
        Tensor x = input({s.T, s.H}, 91), gu = input({s.E, 2 * s.I, s.H}, 92, 0.05f);
        Tensor down = input({s.E, s.H, s.I}, 93, 0.05f), y0 = input({s.T, s.H}, 94);
        Tensor ref = clone(y0);
        ops::moe_experts(kCpuRef, x, gu, down, id_ref, w_ref, ref);
        Tensor dy = to_device(c, y0, dt());
        ops::moe_experts(c, to_device(c, x, dt()), to_device(c, gu, dt()), to_device(c, down, dt()),
                         did, dw, dy);
        EXPECT_TRUE(near(to_host(c, dy), ref, reduction())) << "T=" << s.T << " E=" << s.E;
    }
    Tensor gate = random_tensor({5, 1}, 95), shared = input({5, 64}, 96), y = input({5, 64}, 97);
    Tensor ref = clone(y);
    ops::add_sigmoid_scaled(kCpuRef, gate, shared, ref);
    Tensor dy = to_device(c, y, dt());
    ops::add_sigmoid_scaled(c, to_device(c, gate, DType::F32), to_device(c, shared, dt()), dy);
    EXPECT_TRUE(near(to_host(c, dy), ref, elementwise()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(CudaLogits, TopLogprobsOnARealVocabulary) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t R = 3, V = 248320, limit = 248077, k = 5;
    Tensor logits = random_tensor({R, V}, 100, 3.0f);
    logits.ptr<float>()[17] = logits.ptr<float>()[18] = 30.0f; // a tie: the lower id first
    Tensor lse = zeros({R}), ids = zeros({R, k}, DType::I32), lp = zeros({R, k});
    ops::logprobs_top_k(kCpuRef, logits, limit, lse, ids, lp);
    Tensor d_logits = to_device(c, logits, DType::F32);
    Tensor d_lse = to_device(c, zeros({R}), DType::F32);
    Tensor d_ids = to_device(c, zeros({R, k}, DType::I32), DType::I32);
    Tensor d_lp = to_device(c, zeros({R, k}), DType::F32);
    ops::logprobs_top_k(c, d_logits, limit, d_lse, d_ids, d_lp);
    EXPECT_TRUE(near(to_host(c, d_ids), ids, kExact));
    EXPECT_TRUE(near(to_host(c, d_lse), lse, kCudaF32));
    EXPECT_TRUE(near(to_host(c, d_lp), lp, kCudaF32));
}

TEST(CudaSampling, TokensEqualTheCpuDefinition) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t R = 48, V = 5000;
    Tensor logits = random_tensor({R, V}, 110, 2.0f);
    std::vector<ops::SamplingParamsRow> params(R);
    for (int64_t r = 0; r < R; ++r) {
        auto& p = params[size_t(r)];
        p.greedy = r % 6 == 0;
        p.temperature = 0.5f + 0.1f * float(r % 7);
        p.top_k = (r % 3 == 0) ? 0 : int32_t(5 + r);
        p.top_p = (r % 4 == 0) ? 1.0f : 0.8f;
        p.min_p = (r % 5 == 0) ? 0.05f : 0.0f;
        p.seed = 1000 + uint64_t(r);
        p.position = r * 3;
    }
    logits.ptr<float>()[5 * V + 11] = NAN; // row 5 must fail, never sample
    Tensor tok = zeros({R}, DType::I32), st = zeros({R}, DType::I32);
    ops::sample_tokens(kCpuRef, logits, V, params.data(), tok, st);
    const int64_t bytes = R * int64_t(sizeof(ops::SamplingParamsRow));
    Tensor d_params = Tensor::empty(ops::device_allocator(c.device), DType::U8, {bytes});
    ops::upload(c, TensorView::contiguous(params.data(), DType::U8, Device::cpu(), {bytes}),
                d_params);
    Tensor d_tok = to_device(c, zeros({R}, DType::I32), DType::I32);
    Tensor d_st = to_device(c, zeros({R}, DType::I32), DType::I32);
    ops::sample_tokens(c, to_device(c, logits, DType::F32), V,
                       static_cast<const ops::SamplingParamsRow*>(d_params.view().data), d_tok,
                       d_st);
    EXPECT_TRUE(near(to_host(c, d_st), st, kExact));
    EXPECT_TRUE(near(to_host(c, d_tok), tok, kExact));
    EXPECT_EQ(st.ptr<int32_t>()[5], ops::kSampleNonFinite);
}

TEST(CudaMemory, RandomFillMatchesTheHostStream) {
    const auto c = cuda_ctx(DType::F32);
    Tensor host = zeros({4096});
    ops::fill_random(ops::ExecContext::cpu(), host, 77, 0.5f, 2.0f);
    Tensor dev = to_device(c, zeros({4096}), DType::F32);
    ops::fill_random(c, dev, 77, 0.5f, 2.0f);
    EXPECT_TRUE(near(to_host(c, dev), host, kCudaF32));
}

} // namespace
} // namespace ninfer::test
