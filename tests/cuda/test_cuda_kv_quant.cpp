// Quantized KV planes (ops/kv_codec.h) on CUDA (label cuda), int8 and fp8, F32 and BF16:
// kv_cache_write's codes and scales equal the CPU's bit for bit (zero rows, a NaN poisoning its
// group, a partial group); attention_prep's fused route stores exactly what kv_cache_write
// stores for the same rows; paged_attention's decode route (one row per sequence, contexts
// ending mid-tile and mid-block, GQA groups 8 and 6, split-K on and off, staged codes with and
// without 16-byte copies) and its tensor-core prefill route (chunks after a cached context,
// ragged batches) against the CPU reference run over the same quantized cache copied from the
// device; the cuDNN prefill route over bf16 staging of the same planes, with NaN in every row no
// sequence wrote. A control proves the comparison can fail: the reference over the same codes
// with every scale 1.0 must not be within tolerance (and cuDNN run one key short must fail).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "cuda/cuda_test_util.h"
#include "cuda/kv_planes_test_util.h"
#include "ops/attention.h"
#include "ops/attention_prep.h"
#include "ops/attention_test_util.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_flash.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/kv_cache.h"

namespace ninfer::test {
namespace {

using ops::KvDtype;
constexpr KvDtype kCodecs[] = {KvDtype::Int8, KvDtype::Fp8};

Tensor raw_host(const ops::ExecContext& c, const Tensor& dev) {
    Tensor t =
        Tensor::empty(cpu_allocator(), dev.view().dtype, dev.view().shape.data(), dev.view().ndim);
    ops::synchronize(c);
    ops::download(c, dev, t);
    return t;
}
Planes planes_to_host(const ops::ExecContext& c, const Planes& d) {
    return {raw_host(c, d.k), raw_host(c, d.v), raw_host(c, d.k_scale), raw_host(c, d.v_scale)};
}

float scale_value(const Tensor& scales, int64_t i) {
    return scales.view().dtype == DType::F16 ? f16_to_float(scales.ptr<uint16_t>()[i])
                                             : scales.ptr<float>()[i];
}

// got == want: codes byte for byte, scales bit for bit except that any two NaNs are equal
// (the NaN a poisoned group's scale gets need not carry the same payload on both sides).
::testing::AssertionResult same_planes(const Planes& got, const Planes& want) {
    const char* names[] = {"k codes", "v codes", "k scales", "v scales"};
    for (int t = 0; t < 4; ++t) {
        const TensorView a = got.all()[size_t(t)]->view(), b = want.all()[size_t(t)]->view();
        const int64_t size = dtype_size(a.dtype);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < a.numel(); ++i) {
            const bool equal = std::memcmp(a.ptr<char>() + i * size, b.ptr<char>() + i * size,
                                           size_t(size)) == 0 ||
                               (t >= 2 && std::isnan(scale_value(*got.all()[size_t(t)], i)) &&
                                std::isnan(scale_value(*want.all()[size_t(t)], i)));
            if (!equal && bad++ == 0) first = i;
        }
        if (bad)
            return ::testing::AssertionFailure() << names[t] << ": " << bad << " of " << a.numel()
                                                 << " differ, first at " << first;
    }
    return ::testing::AssertionSuccess();
}

// Every K and V scale of host planes set to `value` (in the scales' dtype).
void set_every_scale(const Planes& p, float value) {
    for (const Tensor* t : {&p.k_scale, &p.v_scale})
        for (int64_t i = 0; i < t->numel(); ++i) {
            if (t->view().dtype == DType::F16)
                t->ptr<uint16_t>()[i] = float_to_f16(value);
            else
                t->ptr<float>()[i] = value;
        }
}

// The same codes with every scale 1.0 (the control the comparisons must fail).
Planes with_unit_scales(const Planes& p) {
    Planes u{clone(p.k), clone(p.v), clone(p.k_scale), clone(p.v_scale)};
    set_every_scale(u, 1.0f);
    return u;
}

std::string describe(KvDtype dt, AttnDims d, const std::vector<SeqSpec>& seqs) {
    std::ostringstream s;
    s << ops::kv_dtype_name(dt, DType::F32) << " nH=" << d.nH << " nKV=" << d.nKV << " D=" << d.D
      << " seqs (rows@pos):";
    for (const SeqSpec& q : seqs) s << " " << q.rows << "@" << q.pos_begin;
    return s.str();
}

bool fused_routes_on() {
    const char* env = std::getenv("NINFER_FUSED"); // the switch fused_routes_enabled() reads
    return !(env && std::string(env) == "0");
}

int32_t blocks_needed(const std::vector<SeqSpec>& seqs) {
    int32_t n = 0;
    for (const SeqSpec& s : seqs) n += (s.pos_begin + s.rows + kBlock - 1) / kBlock;
    return n;
}

class CudaKvQuant : public CudaDtypeTest {
protected:
    // Device planes of NB blocks (host_planes' bytes where nothing is written) with every position
    // [0, pos_begin + rows) of each sequence written by CUDA's kv_cache_write from random K, V.
    // With nan_unwritten, every scale starts as NaN, so each row no sequence wrote decodes to
    // NaN (stale memory at its worst).
    Planes filled_planes(const ops::ExecContext& c, KvDtype kv, AttnDims d,
                         const std::vector<SeqSpec>& seqs, int32_t NB, uint64_t seed,
                         bool nan_unwritten = false) const {
        std::vector<SeqSpec> all;
        int64_t rows = 0;
        for (const SeqSpec& s : seqs) {
            all.push_back({s.pos_begin + s.rows, 0, s.slot, s.blocks});
            rows += s.pos_begin + s.rows;
        }
        DualBatch fill(c, all, kBlock);
        Planes initial = host_planes(kv, NB, d.nKV, d.D, seed);
        if (nan_unwritten) set_every_scale(initial, std::numeric_limits<float>::quiet_NaN());
        Planes dev = planes_to_device(c, initial);
        const Tensor k = to_device(c, input({rows, d.nKV, d.D}, seed + 1), dt());
        const Tensor v = to_device(c, input({rows, d.nKV, d.D}, seed + 2), dt());
        ops::kv_cache_write(c, k, v, fill.device(), dev.kp(), dev.vp());
        ops::synchronize(c);
        return dev;
    }

    // paged_attention on the device over filled planes, the CPU reference over the device's
    // planes, and the reference over the same codes with unit scales (the control).
    struct AttentionRun {
        Tensor got, ref, unit_ref;
        bool flash_route = false;
        std::string what;
    };
    AttentionRun run_attention(KvDtype kv, AttnDims d, std::vector<SeqSpec> seqs, uint64_t seed,
                               bool nan_unwritten) const {
        const auto c = ctx();
        const int32_t NB = blocks_needed(seqs) + 3; // 3 blocks no sequence owns
        seqs = with_blocks(seqs, NB, seed);
        DualBatch batch(c, seqs, kBlock);
        const Planes dev = filled_planes(c, kv, d, seqs, NB, seed, nan_unwritten);
        const int64_t T = batch.host().num_rows;
        const Tensor q = input({T, d.nH, d.D}, seed + 3);
        const Tensor dq = to_device(c, q, dt());
        Tensor out = to_device(c, zeros({T, d.nH, d.D}), dt());
        AttentionRun run;
        run.what = describe(kv, d, seqs);
        run.flash_route = ops::cuda::flash_prefill_supported(dq, dev.kp(), dev.vp(), out) &&
                          batch.host().max_rows_per_seq >= ops::cuda::kFlashMinRows;
        const float scale = 1.0f / std::sqrt(float(d.D));
        ops::paged_attention(c, dq, dev.kp(), dev.vp(), batch.device(), scale, out);
        run.got = to_host(c, out);
        const Planes host = planes_to_host(c, dev);
        run.ref = zeros({T, d.nH, d.D});
        ops::paged_attention(kCpuRef, q, host.kp(), host.vp(), batch.host(), scale, run.ref);
        const Planes unit = with_unit_scales(host);
        run.unit_ref = zeros({T, d.nH, d.D});
        ops::paged_attention(kCpuRef, q, unit.kp(), unit.vp(), batch.host(), scale, run.unit_ref);
        return run;
    }

    void check_attention(KvDtype kv, AttnDims d, std::vector<SeqSpec> seqs, const Tolerance& tol,
                         bool flash_route, uint64_t seed, bool nan_unwritten = false) const {
        const AttentionRun run = run_attention(kv, d, std::move(seqs), seed, nan_unwritten);
        EXPECT_EQ(run.flash_route, flash_route) << run.what;
        EXPECT_TRUE(near(run.got, run.ref, tol)) << run.what;
        EXPECT_FALSE(near(run.got, run.unit_ref, tol))
            << "control (unit scales) passed: " << run.what;
    }
};

TEST_P(CudaKvQuant, CacheWriteEqualsTheCpuBitForBit) {
    const auto c = ctx();
    const std::vector<SeqSpec> mixed{{1, 40, 0}, {37, 0, 1}, {17, 20, 2}, {1, 149, 3}, {65, 0, 4}};
    for (KvDtype kv : kCodecs)
        for (int64_t D : {256, 128, 72}) { // 72: a partial int8 group, rows not 16-byte multiples
            const int64_t nKV = 2;
            const int32_t NB = blocks_needed(mixed) + 4;
            const std::vector<SeqSpec> seqs = with_blocks(mixed, NB, 400 + uint64_t(D));
            DualBatch batch(c, seqs, kBlock);
            const int64_t T = batch.host().num_rows;
            Tensor k = input({T, nKV, D}, 401, 2.0f), v = input({T, nKV, D}, 402, 2.0f);
            const int64_t row = nKV * D; // row r, head h, dim d at r * row + h * D + d
            for (int64_t d = 0; d < D; ++d) {
                k.ptr<float>()[0 * row + 0 * D + d] = 0.0f; // an all-zero row
                v.ptr<float>()[5 * row + 1 * D + d] = 0.0f;
            }
            k.ptr<float>()[3 * row + 1 * D + 70 % D] = std::numeric_limits<float>::quiet_NaN();
            v.ptr<float>()[7 * row + 0 * D + 1] = std::numeric_limits<float>::quiet_NaN();
            const Planes initial = host_planes(kv, NB, nKV, D, 403);
            Planes ref{clone(initial.k), clone(initial.v), clone(initial.k_scale),
                       clone(initial.v_scale)};
            ops::kv_cache_write(kCpuRef, k, v, batch.host(), ref.kp(), ref.vp());
            const Planes dev = planes_to_device(c, initial);
            ops::kv_cache_write(c, to_device(c, k, dt()), to_device(c, v, dt()), batch.device(),
                                dev.kp(), dev.vp());
            const Planes got = planes_to_host(c, dev);
            const std::string what = describe(kv, {0, nKV, D}, seqs);
            EXPECT_TRUE(same_planes(got, ref)) << what;
            // The special rows as the codec defines them (row r is at position p of sequence s).
            auto cache_row = [&](int64_t r, int64_t h) {
                int64_t s = 0;
                while (r >= batch.host().host_row_begin[s + 1]) ++s;
                const int64_t p =
                    batch.host().host_pos_begin[s] + r - batch.host().host_row_begin[s];
                return (int64_t(seqs[size_t(s)].blocks[size_t(p / kBlock)]) * kBlock + p % kBlock) *
                           nKV +
                       h;
            };
            const int64_t G = ops::kv_scale_groups(kv, D);
            EXPECT_EQ(scale_value(got.k_scale, cache_row(0, 0) * G), 0.0f) << what;
            for (int64_t d = 0; d < D; ++d)
                EXPECT_EQ(got.k.ptr<uint8_t>()[cache_row(0, 0) * D + d], 0) << what;
            const int64_t nan_group = kv == KvDtype::Int8 ? (70 % D) / 64 : 0;
            for (int64_t g = 0; g < G; ++g)
                EXPECT_EQ(std::isnan(scale_value(got.k_scale, cache_row(3, 1) * G + g)),
                          g == nan_group)
                    << what << " group " << g;
        }
}

TEST_P(CudaKvQuant, AttentionPrepFusedStoresWhatKvCacheWriteStores) {
    const auto c = ctx();
    struct Case {
        int64_t nH, nKV, D, rot;
    };
    const std::vector<SeqSpec> mixed{{1, 17, 0}, {1, 300, 1}, {37, 0, 2}, {20, 45, 3}};
    for (KvDtype kv : kCodecs)
        for (Case tc : {Case{16, 2, 256, 64}, Case{24, 4, 256, 64}, Case{8, 2, 128, 32}}) {
            const int32_t NB = blocks_needed(mixed) + 4;
            const std::vector<SeqSpec> seqs = with_blocks(mixed, NB, 410 + uint64_t(tc.nH));
            DualBatch batch(c, seqs, kBlock);
            const int64_t T = batch.host().num_rows;
            std::vector<int32_t> positions;
            for (const SeqSpec& s : seqs)
                for (int32_t i = 0; i < s.rows; ++i) positions.push_back(s.pos_begin + i);
            const Tensor q_in = input({T, tc.nH, tc.D}, 411, 2.0f),
                         k_in = input({T, tc.nKV, tc.D}, 412, 2.0f),
                         v_in = input({T, tc.nKV, tc.D}, 413, 2.0f), qn = input({tc.D}, 414, 0.2f),
                         kn = input({tc.D}, 415, 0.2f), pos = i32_tensor(positions);
            auto d = [&](const Tensor& t) { return to_device(c, t, dt()); };
            const Tensor dq_in = d(q_in), dk_in = d(k_in), dv_in = d(v_in), dqn = d(qn),
                         dkn = d(kn), dpos = d(pos);
            auto prep = [&](const ops::KvPlane& kc, const ops::KvPlane& vc, const Tensor& q) {
                Tensor k = to_device(c, zeros({T, tc.nKV, tc.D}), dt());
                ops::attention_prep(c, dq_in, dk_in, dv_in, dqn, dkn, 1e-6f, dpos, tc.rot, 1e7,
                                    batch.device(), q, k, kc, vc);
            };
            // The fused route into an unquantized cache: the rows it stores.
            const Tensor dense_k = to_device(c, zeros({NB, kBlock, tc.nKV, tc.D}), dt()),
                         dense_v = to_device(c, zeros({NB, kBlock, tc.nKV, tc.D}), dt());
            const Tensor q_dense = to_device(c, zeros({T, tc.nH, tc.D}), dt());
            prep(dense_k, dense_v, q_dense);
            // The fused route into quantized planes.
            const Planes initial = host_planes(kv, NB, tc.nKV, tc.D, 416);
            const Planes fused = planes_to_device(c, initial);
            const Tensor q_quant = to_device(c, zeros({T, tc.nH, tc.D}), dt());
            const std::string what = describe(kv, {tc.nH, tc.nKV, tc.D}, seqs);
            EXPECT_EQ(ops::cuda::attention_prep_fused_fits(dq_in, dk_in, dv_in, dqn, dkn, tc.rot,
                                                           q_quant, fused.kp(), fused.vp()),
                      fused_routes_on())
                << what;
            prep(fused.kp(), fused.vp(), q_quant);
            // kv_cache_write of the rows the unquantized route stored.
            const Tensor hk = to_host(c, dense_k), hv = to_host(c, dense_v);
            Tensor k_rows = zeros({T, tc.nKV, tc.D}), v_rows = zeros({T, tc.nKV, tc.D});
            const int64_t row = tc.nKV * tc.D;
            int64_t r = 0;
            for (const SeqSpec& s : seqs)
                for (int32_t i = 0; i < s.rows; ++i, ++r) {
                    const int32_t p = s.pos_begin + i;
                    const int64_t at =
                        (int64_t(s.blocks[size_t(p / kBlock)]) * kBlock + p % kBlock) * row;
                    std::memcpy(k_rows.ptr<float>() + r * row, hk.ptr<float>() + at,
                                size_t(row) * 4);
                    std::memcpy(v_rows.ptr<float>() + r * row, hv.ptr<float>() + at,
                                size_t(row) * 4);
                }
            const Planes written = planes_to_device(c, initial);
            ops::kv_cache_write(c, d(k_rows), d(v_rows), batch.device(), written.kp(),
                                written.vp());
            EXPECT_TRUE(same_planes(planes_to_host(c, fused), planes_to_host(c, written))) << what;
            EXPECT_TRUE(near(to_host(c, q_quant), to_host(c, q_dense), kExact)) << what;
            // And the queries as the CPU reference composes them.
            Tensor q_ref = zeros({T, tc.nH, tc.D}), k_ref = zeros({T, tc.nKV, tc.D});
            const Planes ref_planes = host_planes(kv, NB, tc.nKV, tc.D, 416);
            ops::attention_prep(kCpuRef, q_in, k_in, v_in, qn, kn, 1e-6f, pos, tc.rot, 1e7,
                                batch.host(), q_ref, k_ref, ref_planes.kp(), ref_planes.vp());
            EXPECT_TRUE(near(to_host(c, q_quant), q_ref, elementwise())) << what;
        }
}

TEST_P(CudaKvQuant, DecodeRouteAgainstTheReferenceOnTheSameCache) {
    // One row per sequence; contexts ending mid-tile (32 keys) and mid-block (16), at 1 and
    // across many tiles per split. Few rows: split-K.
    const std::vector<SeqSpec> group8{{1, 0, 0}, {1, 16, 1}, {1, 44, 2}, {1, 299, 3}, {1, 3000, 4}};
    const std::vector<SeqSpec> group6{{1, 1, 0}, {1, 32, 1}, {1, 999, 2}, {1, 256, 3}};
    for (KvDtype kv : kCodecs) {
        check_attention(kv, {16, 2, 256}, group8, reduction(), false, 420);
        check_attention(kv, {24, 4, 128}, group6, reduction(), false, 421);
        check_attention(kv, {16, 2, 256}, {{1, 9000, 0}}, reduction(), false, 422);
        // D = 72: element-wise staging (rows not 16-byte multiples), a partial int8 group.
        check_attention(kv, {6, 2, 72}, {{1, 39, 0}, {1, 130, 1}}, reduction(), false, 423);
    }
}

TEST_P(CudaKvQuant, DecodeRouteWithoutSplitK) {
    // 300 rows x 2 kv heads: at least two blocks per SM for any device of <= 300 SMs, so one split.
    std::vector<SeqSpec> seqs;
    for (int32_t s = 0; s < 300; ++s) seqs.push_back({1, 17 + (s * 7) % 50, s});
    for (KvDtype kv : kCodecs) check_attention(kv, {16, 2, 256}, seqs, reduction(), false, 430);
}

TEST_P(CudaKvQuant, PromptChunks) {
    // F32 runs prompt chunks through the decode kernel too; bf16 through the tensor-core route.
    for (KvDtype kv : kCodecs)
        check_attention(kv, {16, 2, 256}, {{40, 0, 0}, {1, 100, 1}}, reduction(),
                        dt() == DType::BF16, 440);
}

TEST_P(CudaKvQuant, DecodeGraphReplaysEqualEager) {
    const auto base = ctx();
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    for (KvDtype kv : kCodecs) {
        const AttnDims d{16, 2, 256};
        std::vector<SeqSpec> seqs{{1, 700, 0}, {1, 45, 1}};
        const int32_t NB = blocks_needed(seqs);
        seqs = with_blocks(seqs, NB, 450);
        DualBatch batch(c, seqs, kBlock);
        const Planes dev = filled_planes(c, kv, d, seqs, NB, 451);
        const Tensor q = to_device(c, input({2, d.nH, d.D}, 452), dt());
        const Tensor initial = zeros({2, d.nH, d.D});
        Tensor out = to_device(c, initial, dt());
        expect_replays_equal_eager(
            c, initial, out,
            [&] { ops::paged_attention(c, q, dev.kp(), dev.vp(), batch.device(), 0.0625f, out); },
            describe(kv, d, seqs));
    }
    ops::synchronize(c);
    ops::bind_device(base);
}

// The cuDNN route over quantized planes (bf16 staging, ops/cuda/attention_cudnn_coded.cu),
// forced by the route table's attention_prefill.coded, with NaN scales in every row no sequence
// wrote (staged as zeros, never attended): a chunk after a cached context ending mid-block, ragged
// batches with decode rows and long cached prefixes, the 35B's and the 27B's heads and head dim
// 128. F32 queries never take it (cuDNN runs bf16): its run count must not move for them.
TEST_P(CudaKvQuant, PromptChunksOnCudnnOverStaleNaNRows) {
    ASSERT_TRUE(ops::cuda::cudnn_available()) << "cuDNN route: " << ops::cuda::cudnn_status();
    ForcedRoute cudnn(ops::RouteId::AttentionPrefillCoded, ops::kRouteCudnn);
    const bool bf16 = dt() == DType::BF16;
    const std::vector<SeqSpec> serving{
        {130, 0, 0}, {1, 40, 1}, {64, 512, 2}, {200, 17, 3}, {1, 3, 4}};
    for (KvDtype kv : kCodecs) {
        const uint64_t before = ops::cuda::cudnn_prefill_runs();
        check_attention(kv, {16, 2, 256}, {{100, 37, 0}}, reduction(), bf16, 460, true);
        check_attention(kv, {24, 4, 256}, serving, reduction(), bf16, 461, true);
        check_attention(kv, {16, 2, 128}, {{40, 0, 0}, {1, 100, 1}, {33, 700, 2}}, reduction(),
                        bf16, 462, true);
        EXPECT_EQ(ops::cuda::cudnn_prefill_runs() - before, bf16 ? 3u : 0u)
            << ops::kv_dtype_name(kv, dt()) << ": calls cuDNN served (see its message on stderr)";
    }
}

// The sabotage arm of the test above: the staged route run one key short must fail the same
// comparison (so the staged values are what the comparison sees). F32 never reaches cuDNN, so
// the sabotage cannot touch it: there the comparison must still pass.
TEST_P(CudaKvQuant, CudnnStagingOneKeyShortIsCaught) {
    ASSERT_TRUE(ops::cuda::cudnn_available()) << "cuDNN route: " << ops::cuda::cudnn_status();
    ForcedRoute cudnn(ops::RouteId::AttentionPrefillCoded, ops::kRouteCudnn);
    const bool bf16 = dt() == DType::BF16;
    for (KvDtype kv : kCodecs) {
        const uint64_t before = ops::cuda::cudnn_prefill_runs();
        ops::cuda::set_cudnn_prefill_sabotage(true);
        const AttentionRun run = run_attention(kv, {16, 2, 256}, {{100, 37, 0}}, 463, true);
        ops::cuda::set_cudnn_prefill_sabotage(false);
        EXPECT_EQ(ops::cuda::cudnn_prefill_runs() - before, bf16 ? 1u : 0u) << run.what;
        EXPECT_EQ(bool(near(run.got, run.ref, reduction())), !bf16)
            << (bf16 ? "one key short passed: " : "F32 changed under a cuDNN sabotage: ")
            << run.what;
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKvQuant, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

class CudaKvQuantFlash : public CudaKvQuant {};

TEST_P(CudaKvQuantFlash, TensorCoreRouteAgainstTheReferenceOnTheSameCache) {
    for (KvDtype kv : kCodecs) {
        check_attention(kv, {16, 2, 256}, {{ops::cuda::kFlashMinRows, 0, 0}}, kBf16Reduction, true,
                        460);
        // Chunks after a cached context: tiles start mid key-tile and mid block.
        check_attention(kv, {16, 2, 256}, {{100, 37, 0}}, kBf16Reduction, true, 461);
        check_attention(kv, {24, 4, 256}, {{70, 300, 0}}, kBf16Reduction, true, 462);
        check_attention(kv, {8, 2, 128}, {{65, 31, 0}, {1, 200, 1}, {17, 5, 2}}, kBf16Reduction,
                        true, 463);
        check_attention(kv, {8, 8, 64}, {{90, 0, 0}, {1, 0, 1}, {64, 64, 2}}, kBf16Reduction, true,
                        464);
    }
}

INSTANTIATE_TEST_SUITE_P(Bf16, CudaKvQuantFlash, ::testing::Values(DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
