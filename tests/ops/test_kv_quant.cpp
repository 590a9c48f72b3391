// Quantized KV planes (ops/kv_codec.h, ops/kv_cache.h) on the CPU: the codecs' rounding bounds,
// kv_cache_write's encoding through the block table, paged_attention and attention_prep on int8
// and fp8 planes.
#include <cstring>
#include <string>

#include "ops/attention_prep.h"
#include "ops/attention_test_util.h"
#include "ops/kv_codec.h"

namespace ninfer::test {
namespace {

using ops::KvDtype;

// Attention over a quantized cache against FP64 attention over the unquantized values: the
// codec's rounding, not the kernel's, sets these. Random values in [-1, 1): int8-g64 moves each
// value by at most amax / 254 (uniform error, ~0.2% of |x| rms), so the output's relative l2
// error is ~0.3%; e4m3 keeps 4 significant bits (<= 2^-4 relative, ~2% rms).
constexpr Tolerance kKvInt8{"kv_int8", 1e-2, 3e-2};
constexpr Tolerance kKvFp8{"kv_fp8", 6e-2, 1.5e-1};

constexpr uint8_t kSentinelCode = 0x5a;

// f raises an Error whose message names `op`.
template <typename F> ::testing::AssertionResult raises_naming(F&& f, const char* op) {
    try {
        f();
    } catch (const Error& e) {
        if (std::string(e.what()).find(op) != std::string::npos)
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "\"" << e.what() << "\" does not name " << op;
    }
    return ::testing::AssertionFailure() << "no error";
}

// An owning quantized plane pair: codes [NB, bs, nKV, D] filled with a sentinel, scales
// [NB, bs, nKV, G] NaN (or 0x7fff f16 bits) where nothing was written.
struct Planes {
    Tensor k, v, k_scale, v_scale;
    ops::KvPlane kp() const { return ops::KvPlane::quantized(k.view(), k_scale.view()); }
    ops::KvPlane vp() const { return ops::KvPlane::quantized(v.view(), v_scale.view()); }
};

Planes make_planes(KvDtype dt, int64_t NB, int64_t nKV, int64_t D) {
    const DType code = ops::kv_code_dtype(dt, DType::F32), scale = ops::kv_scale_dtype(dt);
    const int64_t G = ops::kv_scale_groups(dt, D);
    Planes p{zeros({NB, kBlock, nKV, D}, code), zeros({NB, kBlock, nKV, D}, code),
             zeros({NB, kBlock, nKV, G}, scale), zeros({NB, kBlock, nKV, G}, scale)};
    for (const Tensor* t : {&p.k, &p.v})
        std::memset(t->view().data, kSentinelCode, size_t(t->view().nbytes()));
    for (const Tensor* t : {&p.k_scale, &p.v_scale})
        std::memset(t->view().data, 0x7f, size_t(t->view().nbytes())); // NaN in f16 and f32
    return p;
}

// The plane's value of (block b, offset o, head h, dim d), decoded with the codec.
float decoded(const Tensor& codes, const Tensor& scales, int64_t b, int64_t o, int64_t h,
              int64_t d) {
    const int64_t D = codes.size(3);
    if (codes.view().dtype == DType::I8) {
        using C = ops::kv::Int8G64;
        const auto s = scales.ptr<uint16_t>()[scales.view().offset(b, o, h) + d / C::group_size(int(D))];
        return C::decode(codes.ptr<int8_t>()[codes.view().offset(b, o, h) + d], C::scale_value(s));
    }
    using C = ops::kv::Fp8PerHead;
    const float s = scales.ptr<float>()[scales.view().offset(b, o, h)];
    return C::decode(codes.ptr<uint8_t>()[codes.view().offset(b, o, h) + d], s);
}

// An F32 cache holding the planes' decoded values (blocks that hold codes only).
Tensor decoded_cache(const Tensor& codes, const Tensor& scales) {
    Tensor out = zeros({codes.size(0), codes.size(1), codes.size(2), codes.size(3)});
    float* o = out.ptr<float>();
    for (int64_t b = 0; b < codes.size(0); ++b)
        for (int64_t t = 0; t < codes.size(1); ++t)
            for (int64_t h = 0; h < codes.size(2); ++h)
                for (int64_t d = 0; d < codes.size(3); ++d)
                    *o++ = decoded(codes, scales, b, t, h, d);
    return out;
}

// One (token, head) row of D values written at position 0 of block 0, read back decoded.
std::vector<float> round_trip(KvDtype dt, const std::vector<float>& x, Planes* planes = nullptr) {
    const int64_t D = int64_t(x.size());
    Planes p = make_planes(dt, 1, 1, D);
    Tensor k = zeros({1, 1, D});
    std::memcpy(k.view().data, x.data(), x.size() * sizeof(float));
    HostBatch batch({{1, 0, 0, {0}}}, kBlock);
    ops::kv_cache_write(kRef, k, k, batch, p.kp(), p.vp());
    std::vector<float> out(x.size());
    for (int64_t d = 0; d < D; ++d) out[size_t(d)] = decoded(p.k, p.k_scale, 0, 0, 0, d);
    if (planes) *planes = std::move(p);
    return out;
}

std::vector<float> random_row(int64_t D, uint64_t seed, float scale) {
    Tensor t = random_tensor({D}, seed, scale);
    return std::vector<float>(t.ptr<float>(), t.ptr<float>() + D);
}

TEST(KvCodec, Int8MovesEachValueByAtMostHalfAStep) {
    for (int64_t D : {64, 72, 256}) { // 72: a partial second group
        const std::vector<float> x = random_row(D, 300 + uint64_t(D), 3.0f);
        Planes p;
        const std::vector<float> y = round_trip(KvDtype::Int8, x, &p);
        for (int64_t g = 0; g * 64 < D; ++g) {
            float amax = 0;
            for (int64_t d = g * 64; d < std::min(D, g * 64 + 64); ++d)
                amax = std::max(amax, std::fabs(x[size_t(d)]));
            const float s = f16_to_float(p.k_scale.ptr<uint16_t>()[g]);
            EXPECT_EQ(p.k_scale.ptr<uint16_t>()[g], float_to_f16(amax / 127.0f)) << D << " " << g;
            for (int64_t d = g * 64; d < std::min(D, g * 64 + 64); ++d) {
                // Half a step, plus the f16 rounding of the scale (the code clamps at 127).
                EXPECT_LE(std::fabs(y[size_t(d)] - x[size_t(d)]), 0.5f * s + amax * 1e-3f)
                    << "D=" << D << " d=" << d;
                EXPECT_LE(std::abs(int(p.k.ptr<int8_t>()[d])), 127);
            }
        }
    }
}

TEST(KvCodec, Fp8KeepsFourSignificantBits) {
    const std::vector<float> x = random_row(128, 310, 5.0f);
    Planes p;
    const std::vector<float> y = round_trip(KvDtype::Fp8, x, &p);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float s = p.k_scale.ptr<float>()[0];
    EXPECT_EQ(s, amax / 448.0f);
    for (size_t d = 0; d < x.size(); ++d) {
        // Half an ulp of e4m3 (2^-4 relative), or of its subnormal step (2^-9 s) near zero.
        EXPECT_LE(std::fabs(y[d] - x[d]), std::max(std::fabs(x[d]) / 16.0f, s / 1024.0f) * 1.0001f)
            << d;
        if (std::fabs(x[d]) == amax) { // 448
            EXPECT_EQ(p.k.ptr<uint8_t>()[d] & 0x7f, 0x7e) << d;
        }
    }
}

TEST(KvCodec, ZeroRowsStayZeroAndNaNPoisonsOnlyItsGroup) {
    for (KvDtype dt : {KvDtype::Int8, KvDtype::Fp8}) {
        for (float v : round_trip(dt, std::vector<float>(128, 0.0f))) EXPECT_EQ(v, 0.0f);
        std::vector<float> x = random_row(128, 320, 1.0f);
        x[70] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> y = round_trip(dt, x);
        for (size_t d = 0; d < 128; ++d) {
            // int8: the group of 64 holding dim 70; fp8: the whole (token, head) row.
            const bool poisoned = dt == KvDtype::Fp8 || d >= 64;
            EXPECT_EQ(std::isnan(y[d]), poisoned) << int(dt) << " d=" << d;
        }
    }
}

// Decode rows and prompt chunks over shuffled, reversed block tables (as test_attention.cpp).
const std::vector<SeqSpec> kMixed{{1, 40, 0}, {37, 0, 0}, {17, 20, 0}, {1, 149, 0}, {65, 0, 0}};
constexpr int32_t kMixedBlocks = 30;

// Writes the setup's history and rows into fresh planes of dtype dt.
Planes written_planes(const AttnSetup& a, KvDtype dt) {
    Planes p = make_planes(dt, kMixedBlocks, a.d.nKV, a.d.D);
    for (size_t s = 0; s < a.seqs.size(); ++s) {
        const int32_t n = a.seqs[s].pos_begin;
        if (n == 0) continue;
        HostBatch history({{n, 0, 0, a.seqs[s].blocks}}, kBlock);
        ops::kv_cache_write(kRef, rows(a.k_full[s], 0, n), rows(a.v_full[s], 0, n), history, p.kp(),
                            p.vp());
    }
    HostBatch batch(a.seqs, kBlock);
    ops::kv_cache_write(kRef, a.k, a.v, batch, p.kp(), p.vp());
    return p;
}

TEST(KvQuantAttention, EqualsAttentionOverTheDecodedValues) {
    for (KvDtype dt : {KvDtype::Int8, KvDtype::Fp8})
        for (AttnDims d : {AttnDims{4, 2, 16}, AttnDims{16, 2, 256}, AttnDims{6, 1, 72}}) {
            AttnSetup a = make_setup(d, kMixed, kMixedBlocks, 330 + uint64_t(d.D));
            HostBatch batch(a.seqs, kBlock);
            const Planes p = written_planes(a, dt);
            const Tensor kd = decoded_cache(p.k, p.k_scale), vd = decoded_cache(p.v, p.v_scale);
            const float scale = 1.0f / std::sqrt(float(d.D));
            for (const auto& ctx : {kRef, kFast}) {
                Tensor quant = zeros({a.q.size(0), d.nH, d.D}), dense = zeros({a.q.size(0), d.nH, d.D});
                ops::paged_attention(ctx, a.q, p.kp(), p.vp(), batch, scale, quant);
                ops::paged_attention(ctx, a.q, kd, vd, batch, scale, dense);
                EXPECT_TRUE(near(quant, dense, kExact)) << int(dt) << " D=" << d.D;
            }
        }
}

TEST(KvQuantAttention, StaysWithinTheCodecErrorOfUnquantizedAttention) {
    for (KvDtype dt : {KvDtype::Int8, KvDtype::Fp8}) {
        AttnSetup a = make_setup({16, 2, 256}, kMixed, kMixedBlocks, 340);
        HostBatch batch(a.seqs, kBlock);
        const Planes p = written_planes(a, dt);
        const float scale = 1.0f / std::sqrt(256.0f);
        Tensor out = zeros({a.q.size(0), 16, 256});
        ops::paged_attention(kRef, a.q, p.kp(), p.vp(), batch, scale, out);
        const Tensor naive = naive_attention(a, scale);
        EXPECT_TRUE(near(out, naive, dt == KvDtype::Int8 ? kKvInt8 : kKvFp8)) << int(dt);
        // The cache really was quantized: not within f32 rounding of the exact result.
        EXPECT_FALSE(near(out, naive, kReductionF32)) << int(dt);
    }
}

TEST(KvQuantAttention, WritesOnlyTheRowsPositions) {
    for (KvDtype dt : {KvDtype::Int8, KvDtype::Fp8}) {
        AttnSetup a = make_setup({4, 2, 128}, kMixed, kMixedBlocks, 350);
        const Planes p = written_planes(a, dt);
        std::vector<bool> used(kMixedBlocks, false);
        for (const SeqSpec& s : a.seqs)
            for (int32_t b : s.blocks) used[size_t(b)] = true;
        const int64_t codes_per_block = kBlock * 2 * 128;
        const int64_t scales_per_block = kBlock * 2 * ops::kv_scale_groups(dt, 128);
        const int64_t scale_bytes = dtype_size(ops::kv_scale_dtype(dt));
        for (int32_t b = 0; b < kMixedBlocks; ++b) {
            if (used[size_t(b)]) continue;
            const auto* codes = static_cast<const uint8_t*>(p.k.view().data) + b * codes_per_block;
            for (int64_t i = 0; i < codes_per_block; ++i) ASSERT_EQ(codes[i], kSentinelCode) << b;
            const auto* sc = static_cast<const uint8_t*>(p.v_scale.view().data) +
                             b * scales_per_block * scale_bytes;
            for (int64_t i = 0; i < scales_per_block * scale_bytes; ++i) ASSERT_EQ(sc[i], 0x7f) << b;
        }
        // Every position of every sequence decodes to its value (within a step of the codec).
        for (size_t s = 0; s < a.seqs.size(); ++s)
            for (int64_t pos = 0; pos < a.seqs[s].pos_begin + a.seqs[s].rows; ++pos) {
                const int32_t block = a.seqs[s].blocks[size_t(pos / kBlock)];
                for (int64_t h = 0; h < 2; ++h)
                    for (int64_t d = 0; d < 128; d += 17) {
                        const float x = a.v_full[s].ptr<float>()[(pos * 2 + h) * 128 + d];
                        const float y = decoded(p.v, p.v_scale, block, pos % kBlock, h, d);
                        // Half a step of the row's group scale (int8), or half an e4m3 ulp.
                        const int64_t srow = (int64_t(block) * kBlock + pos % kBlock) * 2 + h;
                        const double bound =
                            dt == KvDtype::Int8
                                ? 0.5 * f16_to_float(p.v_scale.ptr<uint16_t>()[srow * 2 + d / 64]) *
                                      1.01
                                : std::max(std::fabs(x) / 16.0,
                                           p.v_scale.ptr<float>()[srow] / 1024.0) *
                                      1.01;
                        ASSERT_NEAR(y, x, bound) << "s=" << s << " p=" << pos;
                    }
            }
    }
}

TEST(KvQuantAttentionPrep, StoresTheEncodedNormalisedRotatedKeys) {
    const int64_t T = 5, nH = 4, nKV = 2, D = 64;
    const Tensor q_in = random_tensor({T, nH, D}, 360), k_in = random_tensor({T, nKV, D}, 361),
                 v_in = random_tensor({T, nKV, D}, 362), qn = random_tensor({D}, 363, 0.1f),
                 kn = random_tensor({D}, 364, 0.1f);
    const Tensor pos = i32_tensor({7, 8, 9, 10, 11});
    for (KvDtype dt : {KvDtype::Int8, KvDtype::Fp8}) {
        HostBatch batch({{int32_t(T), 7, 0, {2, 0}}}, kBlock);
        // attention_prep into an F32 cache, then that cache's rows encoded by kv_cache_write.
        Tensor q1 = zeros({T, nH, D}), k1 = zeros({T, nKV, D});
        Tensor kc = zeros({3, kBlock, nKV, D}), vc = zeros({3, kBlock, nKV, D});
        ops::attention_prep(kRef, q_in, k_in, v_in, qn, kn, 1e-6f, pos, 32, 1e4, batch, q1, k1, kc,
                            vc);
        Tensor k_rows = zeros({T, nKV, D}), v_rows = zeros({T, nKV, D});
        for (int64_t r = 0; r < T; ++r) {
            const int64_t p = 7 + r, at = ((p < 16 ? 2 : 0) * kBlock + p % kBlock) * nKV * D;
            std::memcpy(k_rows.ptr<float>() + r * nKV * D, kc.ptr<float>() + at, nKV * D * 4);
            std::memcpy(v_rows.ptr<float>() + r * nKV * D, vc.ptr<float>() + at, nKV * D * 4);
        }
        Planes expect = make_planes(dt, 3, nKV, D), got = make_planes(dt, 3, nKV, D);
        ops::kv_cache_write(kRef, k_rows, v_rows, batch, expect.kp(), expect.vp());
        Tensor q2 = zeros({T, nH, D}), k2 = zeros({T, nKV, D});
        ops::attention_prep(kRef, q_in, k_in, v_in, qn, kn, 1e-6f, pos, 32, 1e4, batch, q2, k2,
                            got.kp(), got.vp());
        EXPECT_TRUE(near(q2, q1, kExact));
        for (auto [a, b] : {std::pair{&got.k, &expect.k}, {&got.v, &expect.v},
                            {&got.k_scale, &expect.k_scale}, {&got.v_scale, &expect.v_scale}})
            EXPECT_EQ(std::memcmp(a->view().data, b->view().data, size_t(a->view().nbytes())), 0) << int(dt);
    }
}

TEST(KvQuantAttention, RejectsMismatchedPlanes) {
    AttnSetup a = make_setup({4, 2, 128}, {{3, 0, 0}}, 4, 370);
    HostBatch batch(a.seqs, kBlock);
    Tensor out = zeros({3, 4, 128});
    const Planes i8 = make_planes(KvDtype::Int8, 4, 2, 128);
    const Planes f8 = make_planes(KvDtype::Fp8, 4, 2, 128);
    EXPECT_NO_THROW(ops::kv_cache_write(kFast, a.k, a.v, batch, i8.kp(), i8.vp()));
    const auto fails = [&](const ops::KvPlane& k, const ops::KvPlane& v) {
        EXPECT_TRUE(raises_naming([&] { ops::kv_cache_write(kFast, a.k, a.v, batch, k, v); },
                                  "kv_cache_write"));
        EXPECT_TRUE(raises_naming(
            [&] { ops::paged_attention(kFast, a.q, k, v, batch, 0.1f, out); }, "paged_attention"));
    };
    fails(i8.kp(), f8.vp());                // two codecs
    fails(i8.kp(), a.v_cache);              // int8 K, f32 V
    fails(ops::KvPlane(i8.k.view()), i8.vp()); // codes without scales
    fails(ops::KvPlane::quantized(i8.k.view(), f8.k_scale.view()), i8.vp()); // f32 scales
    const Tensor wide = zeros({4, kBlock, 2, 3}, DType::F16); // 3 groups for 128 dims
    fails(ops::KvPlane::quantized(i8.k.view(), wide.view()), i8.vp());
}

} // namespace
} // namespace ninfer::test
