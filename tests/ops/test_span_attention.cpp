// ops/span_attention.h: the CPU reference against a naive softmax written here (double loops),
// the fast path against the reference, and argument checks. Every case reads its keys through a
// shuffled block table whose unread cache slots hold NaN (a read outside a span shows), spans
// start past 0 (windows) and cross 16-key blocks, rows share table rows, and the heads are
// grouped (GQA). The window cases also check that ignoring key_begin would change the result.
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/span_attention.h"

namespace ninfer::test {
namespace {

struct SpanRow {
    int32_t table_row, begin, end;
};

// Host span arrays and a block table; on the CPU the SpanBatch's device views alias them.
struct Spans {
    std::vector<int32_t> table_row, begin, end, table;
    int32_t num_table_rows = 0, stride = 0, block_size = 16;

    Spans(const std::vector<SpanRow>& rows, const std::vector<std::vector<int32_t>>& blocks,
          int32_t bs)
        : num_table_rows(int32_t(blocks.size())), block_size(bs) {
        for (const SpanRow& r : rows) {
            table_row.push_back(r.table_row);
            begin.push_back(r.begin);
            end.push_back(r.end);
        }
        for (const auto& b : blocks) stride = std::max(stride, int32_t(b.size()));
        for (const auto& b : blocks)
            for (int32_t i = 0; i < stride; ++i) table.push_back(i < int32_t(b.size()) ? b[i] : -1);
    }
    ops::SpanBatch batch() const {
        ops::SpanBatch s;
        s.num_rows = int32_t(table_row.size());
        s.host_table_row = table_row.data();
        s.host_key_begin = begin.data();
        s.host_key_end = end.data();
        s.host_block_table = table.data();
        s.num_table_rows = num_table_rows;
        s.block_table_stride = stride;
        s.block_size = block_size;
        const Device cpu = Device::cpu();
        const int64_t R = s.num_rows;
        auto view = [&](const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
            return TensorView::contiguous(const_cast<int32_t*>(v.data()), DType::I32, cpu, dims);
        };
        s.table_row = view(table_row, {R});
        s.key_begin = view(begin, {R});
        s.key_end = view(end, {R});
        s.block_table = view(table, {num_table_rows, stride});
        return s;
    }
};

// A paged cache [NB, bs, nKV, D] of random values, NaN in every slot no row's span reads.
Tensor paged_cache(const Spans& sp, int64_t NB, int64_t nKV, int64_t D, uint64_t seed) {
    const int64_t bs = sp.block_size, row = nKV * D;
    Tensor c = random_tensor({NB, bs, nKV, D}, seed);
    std::vector<bool> read(size_t(NB * bs), false);
    for (size_t r = 0; r < sp.begin.size(); ++r)
        for (int32_t tau = sp.begin[r]; tau < sp.end[r]; ++tau) {
            const int32_t block = sp.table[sp.table_row[r] * sp.stride + tau / bs];
            read[size_t(block * bs + tau % bs)] = true;
        }
    for (int64_t slot = 0; slot < NB * bs; ++slot)
        if (!read[size_t(slot)])
            for (int64_t i = 0; i < row; ++i)
                c.ptr<float>()[slot * row + i] = std::numeric_limits<float>::quiet_NaN();
    return c;
}

// The contract's formula in double loops, keys found through the block table by hand.
// begin_override >= 0 replaces every row's key_begin (the sabotage the window cases rule out).
Tensor naive(const TensorView& q, const Tensor& kc, const Tensor& vc, const Spans& sp, float scale,
             int32_t begin_override = -1) {
    const int64_t R = q.size(0), nH = q.size(1), D = q.size(2);
    const int64_t bs = sp.block_size, nKV = kc.size(2), group = nH / nKV;
    Tensor out = zeros({R, nH, D});
    for (int64_t r = 0; r < R; ++r) {
        const int64_t b = begin_override >= 0 ? begin_override : sp.begin[r], e = sp.end[r];
        for (int64_t h = 0; h < nH; ++h) {
            const int64_t kvh = h / group;
            auto key = [&](const Tensor& c, int64_t tau) {
                const int64_t block = sp.table[sp.table_row[r] * sp.stride + tau / bs];
                return c.ptr<float>() + ((block * bs + tau % bs) * nKV + kvh) * D;
            };
            const float* qr = q.ptr<float>() + q.offset(r, h);
            std::vector<double> s;
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t tau = b; tau < e; ++tau) {
                double dot = 0;
                for (int64_t d = 0; d < D; ++d) dot += double(qr[d]) * double(key(kc, tau)[d]);
                s.push_back(dot * double(scale));
                mx = std::max(mx, s.back());
            }
            double denom = 0;
            for (double& x : s) denom += x = std::exp(x - mx);
            for (int64_t d = 0; d < D; ++d) {
                double acc = 0;
                for (int64_t tau = b; tau < e; ++tau)
                    acc += s[size_t(tau - b)] / denom * double(key(vc, tau)[d]);
                out.ptr<float>()[(r * nH + h) * D + d] = float(acc);
            }
        }
    }
    return out;
}

Tensor run(const ops::ExecContext& ctx, const TensorView& q, const Tensor& kc, const Tensor& vc,
           const Spans& sp, float scale) {
    Tensor out = zeros({q.size(0), q.size(1), q.size(2)});
    fill_nan(out);
    ops::span_attention(ctx, q, kc, vc, sp.batch(), scale, out);
    return out;
}

// Three table rows over a shuffled pool of 12 blocks of 16 keys (stride 4: 64 keys each).
const std::vector<std::vector<int32_t>> kBlocks = {{7, 2, 9, 0}, {4, 11, 1, 6}, {3, 8, 10, 5}};

// Rows with different spans: windows starting past 0, spans crossing blocks, a one-key span, a
// span ending at the table's reach, rows sharing table rows 0 and 1 (also with one span).
const std::vector<SpanRow> kRows = {{0, 0, 5},   {0, 3, 37}, {1, 16, 17}, {1, 10, 50},
                                    {0, 20, 64}, {2, 0, 64}, {1, 10, 50}, {2, 33, 47}};

TEST(SpanAttention, ReferenceMatchesNaiveGqa) {
    struct Case {
        int64_t nH, nKV, D;
    };
    for (Case tc : {Case{4, 2, 8}, {32, 8, 128}, {3, 3, 5}, {6, 1, 16}}) {
        const Spans sp(kRows, kBlocks, 16);
        const int64_t R = int64_t(kRows.size());
        Tensor q = random_tensor({R, tc.nH, tc.D}, 1, 1.5f);
        Tensor kc = paged_cache(sp, 12, tc.nKV, tc.D, 2), vc = paged_cache(sp, 12, tc.nKV, tc.D, 3);
        const float scale = 1.0f / std::sqrt(float(tc.D));
        const Tensor want = naive(q, kc, vc, sp, scale);
        const Tensor ref = run(kRef, q, kc, vc, sp, scale);
        EXPECT_TRUE(near(ref, want, kElementwiseF32))
            << "nH=" << tc.nH << " nKV=" << tc.nKV << " D=" << tc.D;
        EXPECT_TRUE(near(run(kFast, q, kc, vc, sp, scale), ref, kReductionF32))
            << "nH=" << tc.nH << " nKV=" << tc.nKV << " D=" << tc.D;
    }
}

TEST(SpanAttention, WindowLowerBoundMatters) {
    // Windows [20, 64) and [33, 47) over fully populated blocks (no NaN before the window): a
    // body that ignored key_begin would attend to keys 0.. too and differ by far more than f32
    // noise.
    const std::vector<SpanRow> rows = {{0, 20, 64}, {1, 33, 47}, {1, 17, 18}};
    const Spans sp(rows, kBlocks, 16);
    const int64_t nH = 4, nKV = 2, D = 16;
    Tensor q = random_tensor({3, nH, D}, 4, 2.0f);
    Tensor kc = random_tensor({12, 16, nKV, D}, 5), vc = random_tensor({12, 16, nKV, D}, 6);
    const Tensor want = naive(q, kc, vc, sp, 0.25f);
    EXPECT_FALSE(near(naive(q, kc, vc, sp, 0.25f, 0), want, kReductionF32)); // the data can tell
    for (const auto& ctx : {kRef, kFast})
        EXPECT_TRUE(near(run(ctx, q, kc, vc, sp, 0.25f), want, kReductionF32));
}

TEST(SpanAttention, OneKeySpanReturnsItsValue) {
    // A span of one key: softmax weight 1, out = v of that key for every head of the group.
    const std::vector<SpanRow> rows = {{1, 16, 17}, {2, 63, 64}};
    const Spans sp(rows, kBlocks, 16);
    const int64_t nH = 4, nKV = 2, D = 8;
    Tensor q = random_tensor({2, nH, D}, 7, 3.0f);
    Tensor kc = paged_cache(sp, 12, nKV, D, 8), vc = paged_cache(sp, 12, nKV, D, 9);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = run(ctx, q, kc, vc, sp, 0.7f);
        const int64_t slots[2] = {11 * 16 + 0, 5 * 16 + 15}; // table row 1 block 1; row 2 block 3
        for (int64_t r = 0; r < 2; ++r)
            for (int64_t h = 0; h < nH; ++h)
                for (int64_t d = 0; d < D; ++d)
                    EXPECT_EQ(out.ptr<float>()[(r * nH + h) * D + d],
                              vc.ptr<float>()[(slots[r] * nKV + h / 2) * D + d]);
    }
}

TEST(SpanAttention, RowsSharingATableRowAndSpanAgree) {
    // Rows 3 and 6 of kRows read the same keys; with the same queries they give the same output
    // bit for bit, in both modes.
    const Spans sp(kRows, kBlocks, 16);
    const int64_t nH = 8, nKV = 2, D = 32, R = int64_t(kRows.size());
    Tensor q = random_tensor({R, nH, D}, 10);
    for (int64_t i = 0; i < nH * D; ++i)
        q.ptr<float>()[6 * nH * D + i] = q.ptr<float>()[3 * nH * D + i];
    Tensor kc = paged_cache(sp, 12, nKV, D, 11), vc = paged_cache(sp, 12, nKV, D, 12);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = run(ctx, q, kc, vc, sp, 0.2f);
        EXPECT_TRUE(near(rows(out, 6, 1), rows(out, 3, 1), kExact));
    }
}

TEST(SpanAttention, FastMatchesReferenceStridedQueries) {
    // q as a strided view of a fused projection [R, (nH + 2 nKV) D] (heads packed, rows padded),
    // long spans over 8 blocks of 16, scores of several units.
    std::mt19937 gen(13);
    const int64_t nH = 32, nKV = 8, D = 128, NB = 40, R = 9;
    std::vector<std::vector<int32_t>> blocks(3);
    std::vector<int32_t> pool(NB);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), gen);
    for (int s = 0; s < 3; ++s) blocks[s].assign(pool.begin() + s * 8, pool.begin() + s * 8 + 8);
    std::vector<SpanRow> rows_;
    std::uniform_int_distribution<int> len(1, 128), table(0, 2);
    for (int64_t r = 0; r < R; ++r) {
        const int32_t b = len(gen) - 1, n = len(gen);
        rows_.push_back({table(gen), b, std::min(128, b + n)});
    }
    const Spans sp(rows_, blocks, 16);
    Tensor fused = random_tensor({R, (nH + 2 * nKV) * D + 8}, 14, 2.0f);
    const TensorView q = fused.view().split_heads(0, nH, D);
    Tensor kc = paged_cache(sp, NB, nKV, D, 15), vc = paged_cache(sp, NB, nKV, D, 16);
    const float scale = 1.0f / std::sqrt(float(D));
    const Tensor ref = run(kRef, q, kc, vc, sp, scale);
    EXPECT_TRUE(near(ref, naive(q, kc, vc, sp, scale), kElementwiseF32));
    EXPECT_TRUE(near(run(kFast, q, kc, vc, sp, scale), ref, kReductionF32));
}

TEST(SpanAttention, RejectsBadArguments) {
    const int64_t nH = 4, nKV = 2, D = 8;
    Tensor q = random_tensor({2, nH, D}, 17), out = zeros({2, nH, D});
    Tensor kc = random_tensor({12, 16, nKV, D}, 18), vc = random_tensor({12, 16, nKV, D}, 19);
    auto call = [&](const std::vector<SpanRow>& rows_, const std::vector<std::vector<int32_t>>& b,
                    int32_t bs = 16) {
        const Spans sp(rows_, b, bs);
        ops::span_attention(kFast, q, kc, vc, sp.batch(), 1.0f, out);
    };
    EXPECT_NO_THROW(call({{0, 0, 5}, {1, 60, 64}}, kBlocks));
    EXPECT_THROW(call({{0, 5, 5}, {1, 0, 1}}, kBlocks), Error);            // empty span
    EXPECT_THROW(call({{0, 6, 5}, {1, 0, 1}}, kBlocks), Error);            // reversed span
    EXPECT_THROW(call({{0, -1, 5}, {1, 0, 1}}, kBlocks), Error);           // negative begin
    EXPECT_THROW(call({{0, 0, 65}, {1, 0, 1}}, kBlocks), Error);           // past the table's reach
    EXPECT_THROW(call({{3, 0, 5}, {1, 0, 1}}, kBlocks), Error);            // no such table row
    EXPECT_THROW(call({{0, 0, 5}}, kBlocks), Error);                       // one span for two rows
    EXPECT_THROW(call({{0, 0, 5}, {1, 0, 1}}, kBlocks, 8), Error);         // block size mismatch
    EXPECT_THROW(call({{0, 0, 5}, {1, 0, 20}}, {{0}, {1}}), Error);        // reach of one block
    EXPECT_THROW(call({{0, 0, 5}, {1, 0, 17}}, {{0, 1}, {2, 12}}), Error); // block id >= NB
    EXPECT_NO_THROW(call({{0, 0, 5}, {1, 0, 16}}, {{0, -1}, {2, -1}}));    // unread ids are free
    EXPECT_THROW(call({{0, 0, 5}, {1, 0, 17}}, {{0, 1}, {2, -1}}), Error); // a read -1

    const Spans sp({{0, 0, 5}, {1, 0, 1}}, kBlocks, 16);
    const ops::SpanBatch b = sp.batch();
    Tensor kc3 = random_tensor({12, 16, 3, D}, 20);
    EXPECT_THROW(ops::span_attention(kFast, q, kc3, kc3, b, 1.0f, out), Error); // 4 % 3 heads
    Tensor kd = random_tensor({12, 16, nKV, 4}, 21);
    EXPECT_THROW(ops::span_attention(kFast, q, kd, kd, b, 1.0f, out), Error); // head dim
    EXPECT_THROW(ops::span_attention(kFast, q, kc, vc.view().narrow(0, 0, 11), b, 1.0f, out),
                 Error); // v_cache shape
    Tensor wide = zeros({2, nH, 2 * D});
    EXPECT_THROW(ops::span_attention(kFast, q, kc, vc, b, 1.0f, wide.view().narrow(2, 0, D)),
                 Error); // out not contiguous
    Tensor kbf = zeros({12, 16, nKV, D}, DType::BF16);
    EXPECT_THROW(ops::span_attention(kFast, q, kbf, kbf, b, 1.0f, out), Error); // dtype
    ops::SpanBatch bad = b;
    Tensor f = zeros({2});
    bad.key_begin = f;
    EXPECT_THROW(ops::span_attention(kFast, q, kc, vc, bad, 1.0f, out), Error); // not I32
    bad = b;
    bad.host_key_end = nullptr;
    EXPECT_THROW(ops::span_attention(kFast, q, kc, vc, bad, 1.0f, out), Error);
}

} // namespace
} // namespace ninfer::test
