// The DFlash drafters' CUDA ops against the CPU reference (label cuda), in F32 and BF16 on the
// same rounded inputs: span_attention (GQA groups of 1 to 16 heads, D from 20 to 256 on both
// load paths, windows past 0, spans crossing 16-key blocks and many tiles, rows sharing table
// rows, unread cache slots NaN, q a strided view), grouped_dynamic_conv (segments of 1 row and
// empty ones, dynamic a column range) and dflash_select (greedy with a tie, sampling with u in
// the middle of candidates' intervals, k up to 64, R past one 512-value chunk), graph replays
// equal to the eager runs, and the device's answer to ids outside the codebooks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/dflash.h"
#include "ops/span_attention.h"

namespace ninfer::test {
namespace {

class CudaDflashOps : public CudaDtypeTest {};

// ---- span_attention ----

struct SpanRow {
    int32_t table_row, begin, end;
};

// Span arrays and a block table on the host (for the CPU reference) and the device.
class DualSpans {
public:
    DualSpans(const ops::ExecContext& c, const std::vector<SpanRow>& rows,
              const std::vector<std::vector<int32_t>>& blocks, int32_t bs) {
        for (const SpanRow& r : rows) {
            table_row_.push_back(r.table_row);
            begin_.push_back(r.begin);
            end_.push_back(r.end);
        }
        int32_t stride = 0;
        for (const auto& b : blocks) stride = std::max(stride, int32_t(b.size()));
        for (const auto& b : blocks)
            for (int32_t i = 0; i < stride; ++i)
                table_.push_back(i < int32_t(b.size()) ? b[i] : -1);
        const int64_t R = int64_t(rows.size()), S = int64_t(blocks.size());
        h_table_row_ = i32_tensor(table_row_), h_begin_ = i32_tensor(begin_);
        h_end_ = i32_tensor(end_), h_table_ = i32_tensor(table_);
        host_.num_rows = int32_t(R);
        host_.host_table_row = table_row_.data();
        host_.host_key_begin = begin_.data();
        host_.host_key_end = end_.data();
        host_.host_block_table = table_.data();
        host_.num_table_rows = int32_t(S);
        host_.block_table_stride = stride;
        host_.block_size = bs;
        host_.table_row = h_table_row_;
        host_.key_begin = h_begin_;
        host_.key_end = h_end_;
        host_.block_table = h_table_.view().reshape({S, stride});
        device_ = host_;
        d_table_row_ = to_device(c, h_table_row_, DType::I32);
        d_begin_ = to_device(c, h_begin_, DType::I32);
        d_end_ = to_device(c, h_end_, DType::I32);
        d_table_ = to_device(c, host_.block_table, DType::I32);
        device_.table_row = d_table_row_;
        device_.key_begin = d_begin_;
        device_.key_end = d_end_;
        device_.block_table = d_table_;
    }
    DualSpans(const DualSpans&) = delete;
    DualSpans& operator=(const DualSpans&) = delete;

    const ops::SpanBatch& host() const { return host_; }
    const ops::SpanBatch& device() const { return device_; }
    // Whether some row reads cache slot (block, slot).
    std::vector<bool> read_slots(int64_t num_blocks) const {
        const int32_t bs = host_.block_size;
        std::vector<bool> read(size_t(num_blocks * bs), false);
        for (size_t r = 0; r < begin_.size(); ++r)
            for (int32_t tau = begin_[r]; tau < end_[r]; ++tau) {
                const int32_t b = table_[table_row_[r] * host_.block_table_stride + tau / bs];
                read[size_t(b * bs + tau % bs)] = true;
            }
        return read;
    }

private:
    std::vector<int32_t> table_row_, begin_, end_, table_;
    Tensor h_table_row_, h_begin_, h_end_, h_table_;
    Tensor d_table_row_, d_begin_, d_end_, d_table_;
    ops::SpanBatch host_, device_;
};

// A [NB, bs, nKV, D] cache rounded to dt, NaN in the slots no span reads.
Tensor paged_cache(const DualSpans& sp, int64_t NB, int64_t bs, int64_t nKV, int64_t D,
                   uint64_t seed, DType dt) {
    Tensor c = rounded(random_tensor({NB, bs, nKV, D}, seed), dt);
    const std::vector<bool> read = sp.read_slots(NB);
    for (int64_t slot = 0; slot < NB * bs; ++slot)
        if (!read[size_t(slot)])
            for (int64_t i = 0; i < nKV * D; ++i)
                c.ptr<float>()[slot * nKV * D + i] = std::numeric_limits<float>::quiet_NaN();
    return c;
}

struct SpanCase {
    int64_t nH, nKV, D;
};

// Table rows of `per_row` blocks over a shuffled pool, and rows with windows past 0, spans
// crossing blocks and tiles, one-key spans and rows sharing table rows.
void run_span_case(const ops::ExecContext& c, DType dt, const SpanCase& tc, const Tolerance& tol) {
    const int32_t bs = 16, per_row = 20, tables = 3, NB = tables * per_row + 4;
    std::mt19937 gen(static_cast<uint32_t>(tc.D * 131 + tc.nH));
    std::vector<int32_t> pool(NB);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), gen);
    std::vector<std::vector<int32_t>> blocks(tables);
    for (int s = 0; s < tables; ++s)
        blocks[s].assign(pool.begin() + s * per_row, pool.begin() + (s + 1) * per_row);
    std::vector<SpanRow> rows_ = {{0, 0, 5},     {0, 3, 37},   {1, 16, 17},  {1, 10, 300},
                                  {0, 20, 64},   {2, 0, 320},  {1, 10, 300}, {2, 33, 47},
                                  {2, 319, 320}, {0, 100, 229}};
    std::uniform_int_distribution<int> start(0, 319), len(1, 160), table(0, tables - 1);
    for (int i = 0; i < 6; ++i) {
        const int32_t b = start(gen);
        rows_.push_back({table(gen), b, std::min(320, b + len(gen))});
    }
    const DualSpans sp(c, rows_, blocks, bs);
    const int64_t R = int64_t(rows_.size()), width = (tc.nH + 2 * tc.nKV) * tc.D + 8;
    Tensor fused = rounded(random_tensor({R, width}, 3, 2.0f), dt);
    Tensor kc = paged_cache(sp, NB, bs, tc.nKV, tc.D, 4, dt);
    Tensor vc = paged_cache(sp, NB, bs, tc.nKV, tc.D, 5, dt);
    const float scale = 1.0f / std::sqrt(float(tc.D));
    Tensor ref = zeros({R, tc.nH, tc.D});
    ops::span_attention(kCpuRef, fused.view().split_heads(0, tc.nH, tc.D), kc, vc, sp.host(), scale,
                        ref);
    Tensor dfused = to_device(c, fused, dt);
    Tensor out = to_device(c, zeros({R, tc.nH, tc.D}), dt);
    ops::span_attention(c, dfused.view().split_heads(0, tc.nH, tc.D), to_device(c, kc, dt),
                        to_device(c, vc, dt), sp.device(), scale, out);
    EXPECT_TRUE(near(to_host(c, out), ref, tol))
        << "nH=" << tc.nH << " nKV=" << tc.nKV << " D=" << tc.D;
}

TEST_P(CudaDflashOps, SpanAttentionMatchesReference) {
    const auto c = ctx();
    // GQA 4/2 and 32/8 at D = 128 (the drafters'), a group of 16 (two blocks per KV head), no
    // grouping, D not a multiple of 8 (element loads) and D = 256 (every lane's 8 dims).
    for (SpanCase tc :
         {SpanCase{4, 2, 64}, {32, 8, 128}, {16, 1, 72}, {3, 3, 20}, {2, 1, 256}, {12, 4, 8}})
        run_span_case(c, dt(), tc, reduction());
}

TEST(CudaSpanAttention, RejectsHeadDimOver256) {
    const auto c = cuda_ctx(DType::BF16);
    const DualSpans sp(c, {{0, 0, 3}}, {{0}}, 16);
    Tensor q = to_device(c, zeros({1, 1, 264}), DType::BF16);
    Tensor kc = to_device(c, zeros({1, 16, 1, 264}), DType::BF16);
    Tensor out = to_device(c, zeros({1, 1, 264}), DType::BF16);
    EXPECT_THROW(ops::span_attention(c, q, kc, kc, sp.device(), 1.0f, out), Error);
}

// ---- grouped_dynamic_conv ----

struct ConvCase {
    std::vector<int32_t> seg;
    int64_t H, taps, group_size;
};

TEST_P(CudaDflashOps, GroupedDynamicConvMatchesReference) {
    const auto c = ctx();
    std::mt19937 gen(7);
    std::vector<int32_t> many{0};
    std::uniform_int_distribution<int> len(0, 16);
    for (int s = 0; s < 40; ++s) many.push_back(many.back() + len(gen));
    for (const ConvCase& tc : {ConvCase{{0, 5, 6}, 64, 2, 16},
                               {{0, 3, 3, 10, 11, 17}, 48, 3, 8},
                               {many, 2048, 4, 128},
                               {{0, 1}, 7, 1, 7}}) {
        const int64_t T = tc.seg.back(), G = tc.H / tc.group_size, cols = tc.taps * G;
        Tensor x = input({T, tc.H}, 8, 2.0f), wide = input({T, cols + 11}, 9);
        Tensor base = input({tc.taps, tc.H}, 10);
        Tensor ref = zeros({T, tc.H});
        ops::grouped_dynamic_conv(kCpuRef, x, wide.view().narrow(1, 3, cols), base, tc.group_size,
                                  tc.seg.data(), i32_tensor(tc.seg), ref);
        Tensor dwide = to_device(c, wide, dt()), out = to_device(c, zeros({T, tc.H}), dt());
        ops::grouped_dynamic_conv(c, to_device(c, x, dt()), dwide.view().narrow(1, 3, cols),
                                  to_device(c, base, dt()), tc.group_size, tc.seg.data(),
                                  to_device(c, i32_tensor(tc.seg), DType::I32), out);
        EXPECT_TRUE(near(to_host(c, out), ref, reduction()))
            << "T=" << T << " H=" << tc.H << " taps=" << tc.taps;
    }
}

// ---- dflash_select ----

// One proposal on the host (rounded to dt) and its device copies.
struct Proposal {
    int64_t B, K, k, R, V;
    Tensor unary, cand, g, P, S, anchor, u;
    Proposal(int64_t B_, int64_t K_, int64_t k_, int64_t R_, int64_t V_, uint64_t seed, DType dt)
        : B(B_), K(K_), k(k_), R(R_), V(V_), unary(random_tensor({B_, K_, k_}, seed, 0.5f)),
          cand(zeros({B_, K_, k_}, DType::I32)),
          g(rounded(random_tensor({B_, K_, R_}, seed + 1), dt)),
          // Entries of size R^-1/4: the codebook term has unit scale, as the unary one.
          P(rounded(random_tensor({V_, R_}, seed + 2, float(std::pow(double(R_), -0.25))), dt)),
          S(rounded(random_tensor({V_, R_}, seed + 3, float(std::pow(double(R_), -0.25))), dt)),
          anchor(zeros({B_}, DType::I32)), u(zeros({B_, K_})) {
        std::mt19937 gen(static_cast<uint32_t>(seed));
        std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
        for (int64_t i = 0; i < cand.numel(); ++i) cand.ptr<int32_t>()[i] = id(gen);
        for (int64_t b = 0; b < B; ++b) anchor.ptr<int32_t>()[b] = id(gen);
    }
    struct Out {
        Tensor path, q;
    };
    Out reference(float temperature) const {
        Out o{zeros({B, K}, DType::I32), zeros({B, K, k})};
        ops::dflash_select(kCpuRef, unary, cand, g, P, S, anchor, u, temperature, o.path, o.q);
        return o;
    }
    Out device(const ops::ExecContext& c, DType dt, float temperature) const {
        Tensor dpath = to_device(c, zeros({B, K}, DType::I32), DType::I32);
        Tensor dq = to_device(c, zeros({B, K, k}), DType::F32);
        ops::dflash_select(c, to_device(c, unary, DType::F32), to_device(c, cand, DType::I32),
                           to_device(c, g, dt), to_device(c, P, dt), to_device(c, S, dt),
                           to_device(c, anchor, DType::I32), to_device(c, u, DType::F32),
                           temperature, dpath, dq);
        return {to_host(c, dpath), to_host(c, dq)};
    }
    // u at the middle of a candidate's interval of the prefix sums at every position (one whose
    // probability is at least 0.02, from (b + 3 i) % k on), so that f32 and f64 pick alike. Set
    // one position at a time: each position's q depends on the earlier picks.
    void aim(float temperature) {
        for (int64_t i = 0; i < K; ++i) {
            const Out ref = reference(temperature);
            for (int64_t b = 0; b < B; ++b) {
                const float* q = ref.q.ptr<float>() + (b * K + i) * k;
                int64_t j = (b + 3 * i) % k;
                while (q[j] < 0.02f) j = (j + 1) % k;
                double below = 0;
                for (int64_t c = 0; c < j; ++c) below += q[c];
                u.ptr<float>()[b * K + i] = float(below + q[j] / 2);
            }
        }
    }
};

TEST_P(CudaDflashOps, DflashSelectGreedyMatchesReference) {
    const auto c = ctx();
    struct Case {
        int64_t B, K, k, R, V;
    };
    for (Case tc : {Case{3, 7, 16, 8, 50},
                    {3, 7, 16, 256, 50},
                    {3, 7, 16, 100, 50},
                    {2, 9, 64, 512, 300},
                    {4, 5, 33, 1000, 80},
                    {5, 16, 1, 32, 10}}) {
        Proposal p(tc.B, tc.K, tc.k, tc.R, tc.V, uint64_t(tc.R + tc.k), dt());
        if (tc.k == 16) { // a tie at (1, 2): candidates 3 and 9 alike and on top; 3 wins
            int32_t* cand = p.cand.ptr<int32_t>() + (1 * tc.K + 2) * tc.k;
            float* unary = p.unary.ptr<float>() + (1 * tc.K + 2) * tc.k;
            cand[9] = cand[3];
            unary[3] = unary[9] = 100.0f;
        }
        const Proposal::Out ref = p.reference(0.0f), got = p.device(c, dt(), 0.0f);
        EXPECT_TRUE(near(got.path, ref.path, kExact)) << "k=" << tc.k << " R=" << tc.R;
        EXPECT_TRUE(near(got.q, ref.q, kExact)) << "k=" << tc.k << " R=" << tc.R;
        if (tc.k == 16) {
            EXPECT_EQ(got.q.ptr<float>()[(1 * tc.K + 2) * tc.k + 3], 1.0f);
        }
    }
}

TEST_P(CudaDflashOps, DflashSelectSamplingMatchesReference) {
    const auto c = ctx();
    struct Case {
        int64_t B, K, k, R, V;
        float temperature;
    };
    for (Case tc : {Case{3, 7, 16, 8, 50, 0.8f},
                    {3, 7, 16, 256, 50, 0.8f},
                    {2, 9, 64, 700, 300, 1.3f},
                    {3, 4, 5, 64, 20, 0.5f}}) {
        Proposal p(tc.B, tc.K, tc.k, tc.R, tc.V, uint64_t(tc.R + 2 * tc.k), dt());
        p.aim(tc.temperature);
        p.u.ptr<float>()[p.u.numel() - 1] = 2.0f; // past every prefix sum: the last candidate
        const Proposal::Out ref = p.reference(tc.temperature);
        const Proposal::Out got = p.device(c, dt(), tc.temperature);
        EXPECT_TRUE(near(got.path, ref.path, kExact)) << "k=" << tc.k << " R=" << tc.R;
        // q is F32 from exactly the reference's inputs: f32 against FP64, in both dtypes.
        EXPECT_TRUE(near(got.q, ref.q, kCudaF32)) << "k=" << tc.k << " R=" << tc.R;
        for (int64_t row = 0; row < tc.B * tc.K; ++row) {
            double sum = 0;
            for (int64_t j = 0; j < tc.k; ++j) sum += got.q.ptr<float>()[row * tc.k + j];
            EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << row;
        }
    }
}

TEST(CudaDflashSelect, OutOfRangeIdsMarkTheRestOfTheWalk) {
    // The device cannot raise: a candidate id outside the codebooks at (1, 3) leaves path -1 and
    // q 0 from there on for sequence 1 (the CPU rejects it), the other sequences unaffected.
    const auto c = cuda_ctx(DType::F32);
    Proposal p(3, 7, 16, 64, 50, 21, DType::F32);
    const Proposal::Out ref = p.reference(0.0f);
    p.cand.ptr<int32_t>()[(1 * 7 + 3) * 16 + 5] = 50;
    const Proposal::Out got = p.device(c, DType::F32, 0.0f);
    for (int64_t b = 0; b < 3; ++b)
        for (int64_t i = 0; i < 7; ++i) {
            const bool marked = b == 1 && i >= 3;
            EXPECT_EQ(got.path.ptr<int32_t>()[b * 7 + i],
                      marked ? -1 : ref.path.ptr<int32_t>()[b * 7 + i])
                << "b=" << b << " i=" << i;
            for (int64_t j = 0; j < 16; ++j)
                EXPECT_EQ(got.q.ptr<float>()[(b * 7 + i) * 16 + j],
                          marked ? 0.0f : ref.q.ptr<float>()[(b * 7 + i) * 16 + j]);
        }
}

TEST(CudaDflashGraphs, ReplaysEqualEagerBitForBit) {
    const auto base = cuda_ctx(DType::BF16);
    auto stream = ops::create_stream(base.device);
    ops::ExecContext c = base;
    c.stream = stream.get();
    ops::bind_device(c);
    {
        const DualSpans sp(c, {{0, 3, 200}, {1, 0, 17}, {0, 100, 101}},
                           {{5, 0, 9, 2, 7, 1, 3, 4, 6, 8, 10, 11, 12}, {13, 14}}, 16);
        const int64_t nH = 32, nKV = 8, D = 128;
        Tensor q = to_device(c, rounded(random_tensor({3, nH, D}, 30), DType::BF16), DType::BF16);
        Tensor kc =
            to_device(c, rounded(random_tensor({15, 16, nKV, D}, 31), DType::BF16), DType::BF16);
        const Tensor initial = zeros({3, nH, D});
        Tensor out = to_device(c, initial, DType::BF16);
        expect_replays_equal_eager(
            c, initial, out, [&] { ops::span_attention(c, q, kc, kc, sp.device(), 0.09f, out); },
            "span_attention");
    }
    {
        Proposal p(3, 7, 16, 256, 50, 32, DType::BF16);
        p.aim(0.8f);
        Tensor unary = to_device(c, p.unary, DType::F32), cand = to_device(c, p.cand, DType::I32);
        Tensor g = to_device(c, p.g, DType::BF16), P = to_device(c, p.P, DType::BF16);
        Tensor S = to_device(c, p.S, DType::BF16), anchor = to_device(c, p.anchor, DType::I32);
        Tensor u = to_device(c, p.u, DType::F32);
        Tensor path = to_device(c, zeros({3, 7}, DType::I32), DType::I32);
        const Tensor initial = zeros({3, 7, 16});
        Tensor q = to_device(c, initial, DType::F32);
        expect_replays_equal_eager(
            c, initial, q,
            [&] { ops::dflash_select(c, unary, cand, g, P, S, anchor, u, 0.8f, path, q); },
            "dflash_select");
    }
    {
        const std::vector<int32_t> seg{0, 5, 6, 40};
        Tensor x = to_device(c, rounded(random_tensor({40, 2048}, 35), DType::BF16), DType::BF16);
        Tensor dyn =
            to_device(c, rounded(random_tensor({40, 4 * 16}, 33), DType::BF16), DType::BF16);
        Tensor w = to_device(c, rounded(random_tensor({4, 2048}, 34), DType::BF16), DType::BF16);
        Tensor dseg = to_device(c, i32_tensor(seg), DType::I32);
        const Tensor initial = zeros({40, 2048});
        Tensor out = to_device(c, initial, DType::BF16);
        expect_replays_equal_eager(
            c, initial, out,
            [&] { ops::grouped_dynamic_conv(c, x, dyn, w, 128, seg.data(), dseg, out); },
            "grouped_dynamic_conv");
    }
    ops::synchronize(c);
    ops::bind_device(base);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaDflashOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

} // namespace
} // namespace ninfer::test
