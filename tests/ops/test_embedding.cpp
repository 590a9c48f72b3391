// ops/embedding.h: gather of table rows, Fast against Reference and against a direct gather.
#include <random>

#include "ops/embedding.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

std::vector<int32_t> random_ids(int64_t T, int64_t V, uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int32_t> dist(0, int32_t(V - 1));
    std::vector<int32_t> ids(static_cast<size_t>(T), 0);
    for (auto& id : ids) id = dist(gen);
    if (T >= 2) {
        ids[0] = 0; // both ends of the table
        ids[size_t(T - 1)] = int32_t(V - 1);
    }
    return ids;
}

TEST(Embedding, FastMatchesReferenceAcrossShapes) {
    for (int64_t V : {5, 1000}) {
        for (int64_t H : {8, 64, 2048}) {
            Tensor table = random_tensor({V, H}, 11, 1.0f);
            for (int64_t T : {1, 3, 17, 150}) {
                Tensor ids = i32_tensor(random_ids(T, V, uint64_t(T * 7 + V)));
                Tensor ref = zeros({T, H}), fast = zeros({T, H});
                ops::embedding(kRef, ids, table, ref);
                ops::embedding(kFast, ids, table, fast);
                EXPECT_TRUE(near(fast, ref, kExact)) << "V=" << V << " H=" << H << " T=" << T;
            }
        }
    }
}

TEST(Embedding, ReferenceIsPlainGatherWithRepeats) {
    const int64_t V = 6, H = 5;
    Tensor table = random_tensor({V, H}, 12, 2.0f);
    const std::vector<int32_t> id_values{3, 0, 3, 5, 1, 3};
    Tensor ids = i32_tensor(id_values);
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = zeros({int64_t(id_values.size()), H});
        ops::embedding(ctx, ids, table, out);
        for (size_t t = 0; t < id_values.size(); ++t)
            for (int64_t i = 0; i < H; ++i)
                EXPECT_EQ(out.ptr<float>()[t * H + i], table.ptr<float>()[id_values[t] * H + i])
                    << "t=" << t << " i=" << i; // no scaling, bit-exact copy
    }
}

TEST(Embedding, PaddedOutputRowsLeaveThePaddingAlone) {
    const int64_t V = 10, H = 16, T = 4;
    Tensor table = random_tensor({V, H}, 13);
    Tensor ids = i32_tensor({9, 2, 2, 7});
    Tensor wide = zeros({T, H + 8});
    fill_nan(wide);
    TensorView out = wide.view().narrow(1, 0, H); // rows of H values with stride H + 8
    ops::embedding(kFast, ids, table, out);
    Tensor expect = zeros({T, H});
    ops::embedding(kRef, ids, table, expect);
    EXPECT_TRUE(near(out, expect, kExact));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = H; i < H + 8; ++i)
            EXPECT_TRUE(std::isnan(wide.ptr<float>()[t * (H + 8) + i]));
}

TEST(Embedding, RejectsOutOfRangeIds) {
    Tensor table = random_tensor({10, 4}, 14);
    Tensor out = zeros({3, 4});
    for (int32_t bad : {-1, 10, 1 << 30}) {
        Tensor ids = i32_tensor({1, bad, 2});
        EXPECT_THROW(ops::embedding(kRef, ids, table, out), Error) << bad;
        EXPECT_THROW(ops::embedding(kFast, ids, table, out), Error) << bad;
    }
}

TEST(Embedding, RejectsBadShapesAndDtypes) {
    Tensor table = random_tensor({10, 4}, 15);
    Tensor ids = i32_tensor({1, 2, 3});
    Tensor out_rows = zeros({2, 4}), out_cols = zeros({3, 5});
    EXPECT_THROW(ops::embedding(kFast, ids, table, out_rows), Error);
    EXPECT_THROW(ops::embedding(kFast, ids, table, out_cols), Error);
    Tensor f32_ids = zeros({3});
    Tensor out = zeros({3, 4});
    EXPECT_THROW(ops::embedding(kFast, f32_ids, table, out), Error);
    Tensor int_table = zeros({10, 4}, DType::I32), int_out = zeros({3, 4}, DType::I32);
    EXPECT_THROW(ops::embedding(kFast, ids, int_table, out), Error);
    EXPECT_THROW(ops::embedding(kFast, ids, table, int_out), Error);
    Tensor ids2d = zeros({3, 1}, DType::I32);
    EXPECT_THROW(ops::embedding(kFast, ids2d, table, out), Error);
}

} // namespace
} // namespace ninfer::test

namespace ninfer::test {
namespace {

// embedding_bag_add: out[t] += sum_j w[t, j] * table[idx[t, j]], checked against the formula in
// double on random taps (the vision tower's bilinear position embedding), both modes.
TEST(EmbeddingBagAdd, MatchesTheFormulaAndTheReference) {
    const int64_t V = 36, H = 24, T = 19, n = 4;
    Tensor table = random_tensor({V, H}, 21, 1.0f);
    std::mt19937_64 gen(5);
    std::vector<int32_t> idx(size_t(T * n));
    std::vector<float> w(size_t(T * n));
    for (auto& i : idx) i = int32_t(gen() % uint64_t(V));
    for (auto& x : w) x = float(gen() % 1000) / 1000.0f;
    Tensor indices = i32_tensor(idx);
    Tensor weights = zeros({T * n});
    std::copy(w.begin(), w.end(), weights.ptr<float>());
    Tensor base = random_tensor({T, H}, 22, 1.0f);
    Tensor expect = zeros({T, H});
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            double s = 0;
            for (int64_t j = 0; j < n; ++j)
                s += double(w[size_t(t * n + j)]) * table.ptr<float>()[idx[size_t(t * n + j)] * H + h];
            expect.ptr<float>()[t * H + h] = float(double(base.ptr<float>()[t * H + h]) + s);
        }
    for (const auto& ctx : {kRef, kFast}) {
        Tensor out = clone(base.view());
        ops::embedding_bag_add(ctx, indices.view().reshape({T, n}), weights.view().reshape({T, n}),
                               table, out);
        EXPECT_TRUE(near(out, expect, kElementwiseF32));
    }
}

TEST(EmbeddingBagAdd, RejectsIndicesOutsideTheTable) {
    Tensor table = random_tensor({4, 8}, 23, 1.0f);
    Tensor indices = i32_tensor({0, 4});
    Tensor weights = zeros({2});
    Tensor out = zeros({1, 8});
    EXPECT_THROW(ops::embedding_bag_add(kRef, indices.view().reshape({1, 2}),
                                        weights.view().reshape({1, 2}), table, out),
                 Error);
}

} // namespace
} // namespace ninfer::test
