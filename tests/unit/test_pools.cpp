// runtime KvPool, BlockManager, StatePool and build_forward_batch on hand-built sequences.
#include <cstring>
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "runtime/kv_pool.h"
#include "runtime/scheduler/block_manager.h"
#include "runtime/sequence.h"
#include "runtime/state_pool.h"
#include "runtime/step_plan.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using runtime::BlockManager;
using runtime::KvPool;
using runtime::Sequence;
using runtime::StatePool;
using runtime::StepPlan;

const ops::ExecContext kCpu = ops::ExecContext::cpu();

model::CacheSpec small_spec() {
    model::CacheSpec s;
    s.attention_layers = 2;
    s.kv_heads = 2;
    s.head_dim = 4;
    s.gdn_layers = 3;
    s.conv_channels = 6;
    s.conv_history = 3;
    s.value_heads = 2;
    s.key_head_dim = 3;
    s.value_head_dim = 4;
    return s;
}

// ---- KvPool -----------------------------------------------------------------------------------

TEST(KvPool, Shapes) {
    KvPool pool(small_spec(), 10, 16, ops::ExecContext::cpu(), DType::BF16);
    EXPECT_EQ(pool.num_blocks(), 10);
    EXPECT_EQ(pool.block_size(), 16);
    ASSERT_EQ(pool.k_views().size(), 2u);
    ASSERT_EQ(pool.v_views().size(), 2u);
    for (const ops::KvPlane& p : pool.k_views()) {
        EXPECT_EQ(dims_of(p.data), (std::vector<int64_t>{10, 16, 2, 4}));
        EXPECT_EQ(p.data.dtype, DType::BF16);
        EXPECT_FALSE(p.quantized());
    }
    EXPECT_NE(pool.k_views()[0].data.data, pool.v_views()[0].data.data);
    EXPECT_EQ(KvPool::bytes_per_token(small_spec(), DType::BF16), 2 * 2 * 2 * 4 * 2);
    EXPECT_EQ(pool.bytes(), 10 * 16 * KvPool::bytes_per_token(small_spec(), DType::BF16));
}

// zero_block clears one block in every plane (codes and scales) and leaves its neighbours.
TEST(KvPool, ZeroBlockClearsOneBlockEverywhere) {
    KvPool pool(small_spec(), 4, 16, ops::ExecContext::cpu(), DType::BF16, ops::KvDtype::Int8);
    std::vector<TensorView> planes;
    for (const auto* views : {&pool.k_views(), &pool.v_views()})
        for (const ops::KvPlane& p : *views) planes.push_back(p.data), planes.push_back(p.scale);
    for (const TensorView& p : planes) std::memset(p.data, 0x5a, size_t(p.nbytes()));
    pool.zero_block(ops::ExecContext::cpu(), 2);
    for (const TensorView& p : planes) {
        const auto* bytes = static_cast<const unsigned char*>(p.data);
        const int64_t per_block = p.nbytes() / 4;
        for (int64_t i = 0; i < p.nbytes(); ++i)
            ASSERT_EQ(bytes[i], i / per_block == 2 ? 0 : 0x5a) << "byte " << i;
    }
    EXPECT_TRUE(raises([&] { pool.zero_block(ops::ExecContext::cpu(), 4); }, {"block 4"}));
}

TEST(KvPool, QuantizedPlanesCarryTheirScales) {
    model::CacheSpec spec = small_spec();
    spec.head_dim = 72; // int8: two groups of 64 (the second partial)
    for (auto [kv, code, scale, groups] :
         {std::tuple{ops::KvDtype::Int8, DType::I8, DType::F16, 2},
          std::tuple{ops::KvDtype::Fp8, DType::F8E4M3, DType::F32, 1}}) {
        KvPool pool(spec, 10, 16, ops::ExecContext::cpu(), DType::BF16, kv);
        EXPECT_EQ(pool.kv_dtype(), kv);
        for (const ops::KvPlane& p : pool.v_views()) {
            EXPECT_EQ(p.dtype(), kv);
            EXPECT_EQ(p.data.dtype, code);
            EXPECT_EQ(p.scale.dtype, scale);
            EXPECT_EQ(dims_of(p.scale), (std::vector<int64_t>{10, 16, 2, groups}));
        }
        // Per token: 2 layers x (K + V) x 2 heads x (72 code bytes + the row's scales).
        const int64_t per_token = 2 * 2 * 2 * (72 + groups * dtype_size(scale));
        EXPECT_EQ(KvPool::bytes_per_token(spec, DType::BF16, kv), per_token);
        EXPECT_EQ(pool.bytes(), 10 * 16 * per_token);
        // About half of bf16's bytes: what doubles the tokens that fit.
        EXPECT_LT(2 * per_token, KvPool::bytes_per_token(spec, DType::BF16) * 11 / 10);
    }
}

TEST(KvPool, CopyBlockCopiesScalesToo) {
    KvPool pool(small_spec(), 4, 2, ops::ExecContext::cpu(), DType::F32, ops::KvDtype::Fp8);
    const ops::KvPlane& p = pool.k_views()[1];
    for (int64_t i = 0; i < p.scale.numel(); ++i) p.scale.ptr<float>()[i] = float(i);
    for (int64_t i = 0; i < p.data.numel(); ++i) p.data.ptr<uint8_t>()[i] = uint8_t(i);
    pool.copy_block(kCpu, 1, 3);
    const int64_t scales_per_block = 2 * 2, codes_per_block = 2 * 2 * 4;
    for (int64_t i = 0; i < scales_per_block; ++i)
        EXPECT_EQ(p.scale.ptr<float>()[3 * scales_per_block + i], float(scales_per_block + i));
    for (int64_t i = 0; i < codes_per_block; ++i)
        EXPECT_EQ(p.data.ptr<uint8_t>()[3 * codes_per_block + i], uint8_t(codes_per_block + i));
    EXPECT_EQ(p.scale.ptr<float>()[0], 0.0f); // other blocks untouched
}

TEST(KvPool, RejectsEmptyPools) {
    EXPECT_TRUE(raises([] { KvPool(small_spec(), 0, 16, ops::ExecContext::cpu(), DType::F32); }, {"KvPool"}));
    EXPECT_TRUE(raises([] { KvPool(small_spec(), 4, 0, ops::ExecContext::cpu(), DType::F32); }, {"KvPool"}));
}

TEST(KvPool, CopyBlockCopiesEveryLayerAndNothingElse) {
    KvPool pool(small_spec(), 4, 2, ops::ExecContext::cpu(), DType::F32);
    std::vector<TensorView> views;
    for (const auto* planes : {&pool.k_views(), &pool.v_views()})
        for (const ops::KvPlane& p : *planes) views.push_back(p.data);
    for (size_t l = 0; l < views.size(); ++l)
        for (int64_t i = 0; i < views[l].numel(); ++i)
            views[l].ptr<float>()[i] = float(l * 1000 + size_t(i));
    pool.copy_block(kCpu, 1, 3);
    const int64_t per_block = 2 * 2 * 4;
    for (size_t l = 0; l < views.size(); ++l)
        for (int64_t i = 0; i < views[l].numel(); ++i) {
            const int64_t block = i / per_block;
            const int64_t src = block == 3 ? i - 2 * per_block : i;
            ASSERT_EQ(views[l].ptr<float>()[i], float(l * 1000 + size_t(src))) << l << " " << i;
        }
    EXPECT_TRUE(raises([&] { pool.copy_block(kCpu, 0, 4); }, {"block"}));
}

// ---- BlockManager -----------------------------------------------------------------------------

TEST(BlockManager, BlockArithmetic) {
    BlockManager pool(10, 16);
    EXPECT_EQ(pool.num_blocks(), 10);
    EXPECT_EQ(pool.free_blocks(), 10);
    EXPECT_EQ(pool.blocks_for(0), 0);
    EXPECT_EQ(pool.blocks_for(1), 1);
    EXPECT_EQ(pool.blocks_for(16), 1);
    EXPECT_EQ(pool.blocks_for(17), 2);
    EXPECT_TRUE(raises([] { BlockManager(0, 16); }, {"BlockManager"}));
}

TEST(BlockManager, CacheReferencesMakeBlocksReclaimable) {
    BlockManager pool(4, 4);
    const std::vector<int32_t> got = pool.allocate(2);
    pool.retain(got[0], /*cache=*/true);
    EXPECT_EQ(pool.cache_only_blocks(), 0); // the sequence still holds it
    pool.release({got[0]});
    EXPECT_EQ(pool.cache_only_blocks(), 1); // only the cache: reclaimable
    EXPECT_EQ(pool.free_blocks(), 2);
    pool.retain(got[0]); // a new sequence shares it
    EXPECT_EQ(pool.cache_only_blocks(), 0);
    pool.release({got[0]});
    EXPECT_TRUE(raises([&] { pool.release({got[0]}); }, {"sequence reference"}));
    pool.release({got[0]}, /*cache=*/true);
    EXPECT_EQ(pool.cache_only_blocks(), 0);
    EXPECT_EQ(pool.free_blocks(), 3);
    EXPECT_TRUE(raises([&] { pool.release({got[1]}, true); }, {"cache"}));
}

TEST(BlockManager, AllocatesLowIdsFirstAndReusesReleasedBlocks) {
    BlockManager pool(6, 4);
    EXPECT_EQ(pool.allocate(3), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_TRUE(pool.allocate(0).empty());
    EXPECT_EQ(pool.free_blocks(), 3);
    pool.release({1});
    EXPECT_EQ(pool.free_blocks(), 4);
    std::vector<int32_t> next = pool.allocate(4);
    EXPECT_EQ(std::set<int32_t>(next.begin(), next.end()), (std::set<int32_t>{1, 3, 4, 5}));
    EXPECT_EQ(pool.free_blocks(), 0);
}

TEST(BlockManager, ExhaustionIsOutOfMemoryAndAllocatesNothing) {
    BlockManager pool(4, 4);
    EXPECT_TRUE(raises([&] { pool.allocate(5); }, {"5"}, ErrorCategory::OutOfMemory));
    EXPECT_EQ(pool.free_blocks(), 4);
    std::vector<int32_t> all = pool.allocate(4);
    EXPECT_EQ(all.size(), 4u);
    EXPECT_TRUE(raises([&] { pool.allocate(1); }, {"KV"}, ErrorCategory::OutOfMemory));
    pool.release(all);
    EXPECT_EQ(pool.free_blocks(), 4);
}

TEST(BlockManager, RetainKeepsABlockUntilTheLastRelease) {
    BlockManager pool(4, 4);
    const int32_t b = pool.allocate(1)[0];
    pool.retain(b);
    pool.retain(b);
    pool.release({b});
    pool.release({b});
    EXPECT_EQ(pool.free_blocks(), 3);
    pool.release({b});
    EXPECT_EQ(pool.free_blocks(), 4);
}

TEST(BlockManager, RejectsReleaseAndRetainOfFreeBlocks) {
    BlockManager pool(4, 4);
    EXPECT_TRUE(raises([&] { pool.release({0}); }, {"release", "0"}));
    EXPECT_TRUE(raises([&] { pool.retain(1); }, {"retain", "1"}));
    EXPECT_TRUE(raises([&] { pool.release({-1}); }, {"release"}));
    EXPECT_TRUE(raises([&] { pool.release({4}); }, {"release"}));
    EXPECT_TRUE(raises([&] { pool.retain(7); }, {"retain"}));
    const int32_t b = pool.allocate(1)[0];
    pool.release({b});
    EXPECT_TRUE(raises([&] { pool.release({b}); }, {"release"})); // double release
    EXPECT_EQ(pool.free_blocks(), 4);
}

TEST(BlockManager, RandomCyclesLeakNothing) {
    const int64_t N = 37;
    BlockManager pool(N, 8);
    std::mt19937 gen(7);
    std::vector<std::vector<int32_t>> holders; // each holds one reference to each of its blocks
    std::map<int32_t, int> refs;
    for (int step = 0; step < 5000; ++step) {
        const int op = int(gen() % 3);
        if (op == 0) {
            const int64_t n = int64_t(gen() % 9);
            if (n > pool.free_blocks()) {
                ASSERT_TRUE(raises([&] { pool.allocate(n); }, {}, ErrorCategory::OutOfMemory));
                continue;
            }
            std::vector<int32_t> got = pool.allocate(n);
            ASSERT_EQ(int64_t(got.size()), n);
            for (int32_t b : got) {
                ASSERT_TRUE(b >= 0 && b < N) << b;
                ASSERT_EQ(refs[b], 0) << "block " << b << " handed out while in use";
                refs[b] = 1;
            }
            holders.push_back(got);
        } else if (op == 1 && !holders.empty()) {
            // Share a prefix of another holder's blocks.
            const auto& src = holders[gen() % holders.size()];
            std::vector<int32_t> shared(src.begin(),
                                        src.begin() + int64_t(gen() % (src.size() + 1)));
            for (int32_t b : shared) {
                pool.retain(b);
                ++refs[b];
            }
            holders.push_back(shared);
        } else if (!holders.empty()) {
            const size_t i = gen() % holders.size();
            pool.release(holders[i]);
            for (int32_t b : holders[i]) --refs[b];
            holders.erase(holders.begin() + int64_t(i));
        }
        int64_t in_use = 0;
        for (const auto& [b, r] : refs) in_use += r > 0;
        ASSERT_EQ(pool.free_blocks(), N - in_use) << "step " << step;
    }
    for (const auto& h : holders) pool.release(h);
    EXPECT_EQ(pool.free_blocks(), N);
    std::vector<int32_t> all = pool.allocate(N);
    std::sort(all.begin(), all.end());
    std::vector<int32_t> ids(static_cast<size_t>(N));
    std::iota(ids.begin(), ids.end(), 0);
    EXPECT_EQ(all, ids); // every block exactly once
}

// ---- StatePool --------------------------------------------------------------------------------

void fill_slot(const StatePool& pool, int32_t slot, float value) {
    for (const TensorView& v : pool.conv_views()) {
        TensorView s = v.narrow(0, slot, 1);
        for (int64_t i = 0; i < s.numel(); ++i) s.ptr<uint16_t>()[i] = float_to_bf16(value);
    }
    for (const TensorView& v : pool.recurrent_views()) {
        TensorView s = v.narrow(0, slot, 1);
        for (int64_t i = 0; i < s.numel(); ++i) s.ptr<float>()[i] = value;
    }
}

// True when every conv and recurrent element of the slot equals value.
bool slot_is(const StatePool& pool, int32_t slot, float value) {
    for (const TensorView& v : pool.conv_views()) {
        TensorView s = v.narrow(0, slot, 1);
        for (int64_t i = 0; i < s.numel(); ++i)
            if (bf16_to_float(s.ptr<uint16_t>()[i]) != value) return false;
    }
    for (const TensorView& v : pool.recurrent_views()) {
        TensorView s = v.narrow(0, slot, 1);
        for (int64_t i = 0; i < s.numel(); ++i)
            if (s.ptr<float>()[i] != value) return false;
    }
    return true;
}

TEST(StatePool, Shapes) {
    StatePool pool(small_spec(), 3, Device::cpu(), DType::BF16);
    EXPECT_EQ(pool.num_rows(), 3);
    ASSERT_EQ(pool.conv_views().size(), 3u);
    ASSERT_EQ(pool.recurrent_views().size(), 3u);
    EXPECT_EQ(dims_of(pool.conv_views()[0]), (std::vector<int64_t>{3, 6, 3}));
    EXPECT_EQ(pool.conv_views()[0].dtype, DType::BF16);
    EXPECT_EQ(dims_of(pool.recurrent_views()[2]), (std::vector<int64_t>{3, 2, 3, 4}));
    EXPECT_EQ(pool.recurrent_views()[2].dtype, DType::F32);
    EXPECT_EQ(pool.row_bytes(), StatePool::bytes_per_row(small_spec(), DType::BF16));
    EXPECT_EQ(pool.row_bytes(), 3 * (6 * 3 * 2 + 2 * 3 * 4 * 4));
    EXPECT_TRUE(raises([] { StatePool(small_spec(), 0, Device::cpu(), DType::F32); }, {"row"}));
}

TEST(StatePool, Bf16RecurrentStateHalvesItsBytes) {
    model::CacheSpec spec = small_spec();
    spec.recurrent_dtype = DType::BF16; // --gdn-state-dtype bf16
    StatePool pool(spec, 3, Device::cpu(), DType::BF16);
    EXPECT_EQ(pool.recurrent_views()[0].dtype, DType::BF16);
    EXPECT_EQ(pool.conv_views()[0].dtype, DType::BF16); // the conv history keeps its dtype
    EXPECT_EQ(pool.row_bytes(), StatePool::bytes_per_row(spec, DType::BF16));
    EXPECT_EQ(pool.row_bytes(), 3 * (6 * 3 * 2 + 2 * 3 * 4 * 2));
    EXPECT_EQ(runtime::parse_gdn_state_dtype("bf16"), DType::BF16);
    EXPECT_EQ(runtime::parse_gdn_state_dtype("bfloat16"), DType::BF16);
    EXPECT_EQ(runtime::parse_gdn_state_dtype("f32"), DType::F32);
    EXPECT_EQ(runtime::parse_gdn_state_dtype("float32"), DType::F32);
    EXPECT_TRUE(
        raises([] { runtime::parse_gdn_state_dtype("fp8"); }, {"--gdn-state-dtype", "fp8"}));
}

TEST(StatePool, ZeroAndCopyTouchOnlyTheirRows) {
    StatePool pool(small_spec(), 3, Device::cpu(), DType::BF16);
    for (int32_t s = 0; s < 3; ++s) fill_slot(pool, s, 1.5f + float(s));
    pool.zero_row(kCpu, 0);
    EXPECT_TRUE(slot_is(pool, 0, 0.0f));
    EXPECT_TRUE(slot_is(pool, 1, 2.5f)); // untouched
    EXPECT_TRUE(slot_is(pool, 2, 3.5f));
    pool.copy_row(kCpu, 2, 1);
    EXPECT_TRUE(slot_is(pool, 1, 3.5f));
    EXPECT_TRUE(slot_is(pool, 0, 0.0f));
    EXPECT_TRUE(raises([&] { pool.zero_row(kCpu, 3); }, {"row"}));
    EXPECT_TRUE(raises([&] { pool.copy_row(kCpu, -1, 0); }, {"row"}));
}

TEST(StatePool, HostRoundTripRestoresARow) {
    StatePool pool(small_spec(), 2, Device::cpu(), DType::BF16);
    fill_slot(pool, 0, 4.25f);
    std::vector<uint8_t> host(size_t(pool.row_bytes()));
    pool.download_row(kCpu, 0, host.data());
    pool.zero_row(kCpu, 0);
    pool.upload_row(kCpu, host.data(), 1);
    EXPECT_TRUE(slot_is(pool, 1, 4.25f));
    EXPECT_TRUE(slot_is(pool, 0, 0.0f));
}

// ---- build_forward_batch ----------------------------------------------------------------------

// A sequence with `length` tokens (ids base, base + 1, ...) of which `cached` are cached.
std::unique_ptr<Sequence> make_seq(int64_t length, int64_t cached, int32_t base = 0,
                                   int32_t slot = -1, std::vector<int32_t> blocks = {}) {
    auto s = std::make_unique<Sequence>();
    for (int64_t i = 0; i < length; ++i) s->tokens.push_back(base + int32_t(i));
    s->request.prompt = s->tokens;
    s->cached = cached;
    s->slot = slot;
    s->blocks = std::move(blocks);
    return s;
}

using Active = std::vector<std::unique_ptr<Sequence>>;


std::vector<int32_t> ints(const TensorView& v) {
    std::vector<int32_t> out;
    for (double d : to_doubles(v)) out.push_back(int32_t(d));
    return out;
}
std::vector<int32_t> host(const int32_t* p, size_t n) {
    return std::vector<int32_t>(p, p + n);
}

TEST(ForwardBatch, DescribesTheRowsOfEachSequence) {
    Active active;
    active.push_back(make_seq(7, 4, 100, 2, {5, 1}));      // rows 4..6, ends its tokens
    active.push_back(make_seq(20, 19, 200, 0, {3, 4, 7})); // decode row 19
    active.push_back(make_seq(9, 0, 300, 1, {2, 6, 8}));   // prompt chunk 0..3
    StepPlan plan;
    plan.entries = {{active[0].get(), 3}, {active[1].get(), 1}, {active[2].get(), 4}};
    runtime::StepBuffers buffers;
    model::ForwardBatch b = runtime::build_forward_batch(kCpu, plan, 16, buffers);
    EXPECT_EQ(ints(b.tokens), (std::vector<int32_t>{104, 105, 106, 219, 300, 301, 302, 303}));
    EXPECT_EQ(ints(b.positions), (std::vector<int32_t>{4, 5, 6, 19, 0, 1, 2, 3}));
    EXPECT_EQ(ints(b.logit_rows), (std::vector<int32_t>{2, 3}));
    const ops::SeqBatch& q = b.seqs;
    EXPECT_EQ(q.num_seqs, 3);
    EXPECT_EQ(q.num_rows, 8);
    EXPECT_EQ(q.max_rows_per_seq, 4);
    EXPECT_EQ(q.max_context, 20);
    EXPECT_EQ(q.block_size, 16);
    EXPECT_EQ(q.block_table_stride, 3);
    EXPECT_EQ(host(q.host_row_begin, 4), (std::vector<int32_t>{0, 3, 4, 8}));
    EXPECT_EQ(host(q.host_pos_begin, 3), (std::vector<int32_t>{4, 19, 0}));
    EXPECT_EQ(host(q.host_state_slot, 3), (std::vector<int32_t>{2, 0, 1}));
    const std::vector<int32_t> table = {5, 1, 0, 3, 4, 7, 2, 6, 8};
    EXPECT_EQ(host(q.host_block_table, 9), table);
    EXPECT_EQ(q.rows(0), 3);
    EXPECT_EQ(q.rows(2), 4);
    // The device views carry the same values.
    EXPECT_EQ(ints(q.row_begin), (std::vector<int32_t>{0, 3, 4, 8}));
    EXPECT_EQ(ints(q.pos_begin), (std::vector<int32_t>{4, 19, 0}));
    EXPECT_EQ(ints(q.state_slot), (std::vector<int32_t>{2, 0, 1}));
    EXPECT_EQ(dims_of(q.block_table), (std::vector<int64_t>{3, 3}));
    EXPECT_EQ(ints(q.block_table), table);
    EXPECT_EQ(b.tokens.dtype, DType::I32);
}

TEST(ForwardBatch, BuffersAreReusedAcrossSteps) {
    Active active;
    active.push_back(make_seq(40, 0, 0, 0, {0, 1, 2, 3, 4}));
    active.push_back(make_seq(3, 2, 50, 1, {9}));
    runtime::StepBuffers buffers;
    StepPlan big;
    big.entries = {{active[0].get(), 32}, {active[1].get(), 1}};
    big.logit_seqs = {active[1].get()};
    model::ForwardBatch first = runtime::build_forward_batch(kCpu, big, 8, buffers);
    EXPECT_EQ(first.seqs.num_rows, 33);
    EXPECT_EQ(first.seqs.block_table_stride, 5);
    // Next step: the prompt advanced; a smaller plan with narrower block tables.
    active[0]->cached = 32;
    active[1]->cached = 3;
    active[1]->tokens.push_back(77);
    Active one;
    one.push_back(make_seq(5, 4, 60, 3, {6, 7}));
    one.push_back(std::move(active[1]));
    StepPlan small;
    small.entries = {{one[0].get(), 1}, {one[1].get(), 1}};
    small.logit_seqs = {one[0].get(), one[1].get()};
    model::ForwardBatch second = runtime::build_forward_batch(kCpu, small, 8, buffers);
    EXPECT_EQ(ints(second.tokens), (std::vector<int32_t>{64, 77}));
    EXPECT_EQ(ints(second.positions), (std::vector<int32_t>{4, 3}));
    EXPECT_EQ(second.seqs.block_table_stride, 2);
    EXPECT_EQ(ints(second.seqs.block_table), (std::vector<int32_t>{6, 7, 9, 0}));
    EXPECT_EQ(ints(second.seqs.row_begin), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(ints(second.logit_rows), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(second.seqs.max_context, 5);
}

TEST(ForwardBatch, FromAPlannedStep) {
    Active active;
    active.push_back(make_seq(12, 0, 10, 0, {0, 1}));
    active.push_back(make_seq(6, 5, 40, 1, {2}));
    StepPlan plan; // prompt 5 rows, then a decode row
    plan.entries = {{active[0].get(), 5}, {active[1].get(), 1}};
    plan.logit_seqs = {active[1].get()};
    runtime::StepBuffers buffers;
    model::ForwardBatch b = runtime::build_forward_batch(kCpu, plan, 8, buffers);
    EXPECT_EQ(ints(b.tokens), (std::vector<int32_t>{10, 11, 12, 13, 14, 45}));
    EXPECT_EQ(ints(b.positions), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(ints(b.logit_rows), std::vector<int32_t>{5});
    EXPECT_EQ(host(b.seqs.host_row_begin, 3), (std::vector<int32_t>{0, 5, 6}));
    EXPECT_EQ(host(b.seqs.host_block_table, 4), (std::vector<int32_t>{0, 1, 2, 0}));
}

} // namespace
} // namespace ninfer::test
