// The scheduler against a fake model runner. The fake "device" keeps, per state row, the hash
// of the tokens it has absorbed and, per KV block, the token id written at each position. Its
// forward checks that every scheduled sequence's state row and block table hold exactly its
// tokens[0, cached), then writes the new rows; the next token is a function of the state. So
// every correct schedule (batched, chunked, preempted and recomputed, resumed from the prefix
// cache) gives each request the output it gets alone, and a wrong one fails a check.
#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "runtime/memory_plan.h"
#include "runtime/scheduler/scheduler.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using runtime::BlockManager;
using runtime::CacheOp;
using runtime::CacheOps;
using runtime::Scheduler;
using runtime::SchedulerConfig;
using runtime::Sequence;
using runtime::SnapshotCache;
using runtime::StepPlan;

uint64_t absorb(uint64_t h, int32_t token) {
    uint64_t x = h ^ (uint64_t(uint32_t(token)) * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

struct FakeState {
    uint64_t hash = 0;
    int64_t length = 0;
    bool operator==(const FakeState&) const = default;
};

FakeState state_of(const std::vector<int32_t>& tokens, int64_t n) {
    FakeState s;
    for (int64_t i = 0; i < n; ++i) s = {absorb(s.hash, tokens[size_t(i)]), i + 1};
    return s;
}

int32_t next_token(const FakeState& s) {
    return int32_t(s.hash % 50) + 1;
}

// What a request generates alone.
std::vector<int32_t> solo_output(std::vector<int32_t> tokens, int64_t max_new) {
    std::vector<int32_t> out;
    for (int64_t i = 0; i < max_new; ++i) {
        out.push_back(next_token(state_of(tokens, int64_t(tokens.size()))));
        tokens.push_back(out.back());
    }
    return out;
}

// What a zeroed KV entry reads as (never a token; unwritten entries read -1).
constexpr int32_t kZeroedEntry = -2;

struct Harness {
    Harness(SchedulerConfig c, int64_t blocks, int32_t bs, int32_t snapshot_rows,
            int32_t host_buffers)
        : config(c), block_size(bs), manager(blocks, bs) {
        if (snapshot_rows > 0) {
            std::vector<int32_t> rows;
            for (int32_t i = 0; i < snapshot_rows; ++i) rows.push_back(c.max_sequences + i);
            snapshots = std::make_unique<SnapshotCache>(manager, rows, host_buffers);
        }
        scheduler = std::make_unique<Scheduler>(c, manager, snapshots.get());
        state_rows.resize(size_t(c.max_sequences + snapshot_rows));
        host.resize(size_t(host_buffers));
        kv.assign(size_t(blocks), std::vector<int32_t>(size_t(bs), -1));
    }

    uint64_t submit(std::vector<int32_t> prompt, int64_t max_new, int priority = 0) {
        auto seq = std::make_unique<Sequence>();
        seq->request.prompt = prompt;
        seq->request.max_new_tokens = int(max_new);
        seq->request.priority = priority;
        seq->tokens = std::move(prompt);
        seq->arrival = next_arrival++;
        expected[seq->arrival] = solo_output(seq->tokens, max_new);
        scheduler->add(std::move(seq));
        return next_arrival - 1;
    }

    void run(const CacheOps& ops) {
        for (const CacheOp& op : ops) {
            switch (op.kind) {
            case CacheOp::Kind::ZeroSlot: state_rows.at(size_t(op.dst)) = {}; break;
            case CacheOp::Kind::CopySlot:
                state_rows.at(size_t(op.dst)) = state_rows.at(size_t(op.src));
                break;
            case CacheOp::Kind::SlotToHost:
                host.at(size_t(op.dst)) = state_rows.at(size_t(op.src));
                break;
            case CacheOp::Kind::HostToSlot:
                state_rows.at(size_t(op.dst)) = host.at(size_t(op.src));
                break;
            case CacheOp::Kind::CopyBlock: kv.at(size_t(op.dst)) = kv.at(size_t(op.src)); break;
            case CacheOp::Kind::ZeroBlock:
                kv.at(size_t(op.dst)).assign(size_t(block_size), kZeroedEntry);
                break;
            }
        }
    }

    // Checks what each scheduled sequence reads, then writes its rows.
    void forward(const StepPlan& plan) {
        int64_t rows = 0;
        for (const auto& e : plan.entries) {
            const Sequence& s = *e.seq;
            rows += e.rows;
            ASSERT_GE(s.slot, 0);
            ASSERT_LT(s.slot, config.max_sequences);
            ASSERT_EQ(state_rows[size_t(s.slot)], state_of(s.tokens, s.cached))
                << "request " << s.arrival << " reads a wrong state at " << s.cached;
            ASSERT_GE(int64_t(s.blocks.size()) * block_size, s.cached + e.rows);
            for (int64_t p = 0; p < s.cached; ++p)
                ASSERT_EQ(kv[size_t(s.blocks[size_t(p / block_size)])][size_t(p % block_size)],
                          s.tokens[size_t(p)])
                    << "request " << s.arrival << " reads a wrong KV entry at " << p;
            for (const auto& other : scheduler->running()) { // written blocks are private
                if (other.get() == &s) continue;
                for (int64_t p = s.cached; p < s.cached + e.rows; ++p) {
                    ASSERT_EQ(std::count(other->blocks.begin(), other->blocks.end(),
                                         s.blocks[size_t(p / block_size)]),
                              0)
                        << "request " << s.arrival << " writes a block shared with "
                        << other->arrival;
                }
            }
        }
        ASSERT_LE(rows, config.max_batch_tokens);
        for (const auto& e : plan.entries) {
            const Sequence& s = *e.seq;
            for (int64_t p = s.cached; p < s.cached + e.rows; ++p) {
                kv[size_t(s.blocks[size_t(p / block_size)])][size_t(p % block_size)] =
                    s.tokens[size_t(p)];
                FakeState& st = state_rows[size_t(s.slot)];
                st = {absorb(st.hash, s.tokens[size_t(p)]), st.length + 1};
            }
        }
    }

    void finish(Sequence& s, bool cancelled) {
        outputs[s.arrival].assign(s.tokens.begin() + s.prompt_length(), s.tokens.end());
        if (cancelled) cancelled_ids.insert(s.arrival);
        cached_tokens[s.arrival] = s.cached_tokens;
        run(scheduler->finish(s, true));
    }

    // One engine step; false when nothing ran.
    bool step() {
        Scheduler::Step st = scheduler->schedule();
        run(st.setup);
        if (st.plan.entries.empty()) return false;
        forward(st.plan);
        if (::testing::Test::HasFatalFailure()) return false;
        run(scheduler->after_forward(st.plan));
        for (Sequence* s : st.plan.logit_seqs) {
            s->tokens.push_back(next_token(state_rows[size_t(s->slot)]));
            ++s->generated;
            if (s->generated >= s->request.max_new_tokens) finish(*s, false);
        }
        scheduler->collect();
        return true;
    }

    void run_to_end(int max_steps = 100000) {
        for (int i = 0; i < max_steps && has_work(); ++i) {
            step();
            if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_FALSE(has_work()) << "requests left after " << max_steps << " steps";
    }
    bool has_work() const {
        return !scheduler->running().empty() || !scheduler->waiting().empty();
    }

    // Every request got its solo output (a prefix of it when cancelled).
    void check_outputs() const {
        for (const auto& [id, want] : expected) {
            ASSERT_TRUE(outputs.count(id)) << "request " << id << " never finished";
            const auto& got = outputs.at(id);
            if (cancelled_ids.count(id)) {
                ASSERT_LE(got.size(), want.size());
                EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << id;
            } else {
                EXPECT_EQ(got, want) << "request " << id;
            }
        }
    }

    // Nothing leaked: with every snapshot evicted all blocks and slots are free.
    void check_no_leaks() {
        ASSERT_FALSE(has_work());
        EXPECT_EQ(scheduler->free_slots(), config.max_sequences);
        if (snapshots)
            while (snapshots->evict_one()) {
            }
        EXPECT_EQ(manager.free_blocks(), manager.num_blocks());
    }

    SchedulerConfig config;
    int32_t block_size;
    BlockManager manager;
    std::unique_ptr<SnapshotCache> snapshots;
    std::unique_ptr<Scheduler> scheduler;
    std::vector<FakeState> state_rows, host;
    std::vector<std::vector<int32_t>> kv;
    uint64_t next_arrival = 0;
    std::map<uint64_t, std::vector<int32_t>> expected, outputs;
    std::map<uint64_t, int64_t> cached_tokens;
    std::set<uint64_t> cancelled_ids;
};

SchedulerConfig config(int32_t seqs, int64_t batch_tokens, int64_t chunk, int64_t stride = 0) {
    SchedulerConfig c;
    c.max_sequences = seqs;
    c.max_batch_tokens = batch_tokens;
    c.prefill_chunk = chunk;
    c.snapshot_stride = stride;
    return c;
}

std::vector<int32_t> iota_tokens(int64_t n, int32_t base) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back(base + int32_t(i));
    return t;
}

std::vector<int32_t> concat_tokens(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}


TEST(Scheduler, DecodeRowsFirstThenPromptChunksWithinTheBudget) {
    Harness h(config(4, 6, 4), 64, 4, 0, 0);
    const uint64_t a = h.submit(iota_tokens(3, 10), 5);
    ASSERT_TRUE(h.step()); // a's prompt: then a decodes
    h.submit(iota_tokens(20, 100), 2);
    Scheduler::Step st = h.scheduler->schedule();
    ASSERT_EQ(st.plan.entries.size(), 2u);
    // a's decode row first, then b's first chunk of 4 (the prefill-chunk cap).
    std::map<uint64_t, int64_t> rows;
    for (const auto& e : st.plan.entries) rows[e.seq->arrival] = e.rows;
    EXPECT_EQ(rows[a], 1);
    EXPECT_EQ(rows[a + 1], 4);
    h.run(st.setup);
    h.forward(st.plan);
}

TEST(Scheduler, BlocksAreAllocatedAsSequencesGrow) {
    Harness h(config(2, 64, 64), 64, 4, 0, 0);
    h.submit(iota_tokens(6, 1), 10);
    for (int i = 0; i < 12 && h.has_work(); ++i) {
        ASSERT_TRUE(h.step());
        for (const auto& s : h.scheduler->running())
            EXPECT_EQ(int64_t(s->blocks.size()), h.manager.blocks_for(s->cached)) << "step " << i;
    }
    h.run_to_end();
    h.check_outputs();
    h.check_no_leaks();
}

TEST(Scheduler, ALongPromptNeverStarvesShortOnes) {
    Harness h(config(4, 8, 8), 128, 4, 0, 0);
    const uint64_t long_id = h.submit(iota_tokens(200, 1000), 1);
    h.step();
    const uint64_t short_id = h.submit(iota_tokens(3, 5), 2);
    int steps = 0;
    while (!h.outputs.count(short_id) && steps < 10) {
        h.step();
        ++steps;
    }
    EXPECT_TRUE(h.outputs.count(short_id)) << "the short request waited behind the long prompt";
    EXPECT_FALSE(h.outputs.count(long_id));
    h.run_to_end();
    h.check_outputs();
    h.check_no_leaks();
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndResumesIdentically) {
    // 12 blocks of 4 tokens: three requests growing to 30 tokens cannot all be resident.
    Harness h(config(3, 16, 8), 12, 4, 0, 0);
    for (int r = 0; r < 3; ++r) h.submit(iota_tokens(6, 100 * r), 24);
    h.run_to_end();
    EXPECT_GT(h.scheduler->stats().preemptions, 0);
    h.check_outputs();
    h.check_no_leaks();
}

TEST(Scheduler, LowerPriorityValuesRunFirstAndPreemptWorseOnes) {
    Harness h(config(1, 16, 8), 64, 4, 0, 0);
    const uint64_t low = h.submit(iota_tokens(5, 1), 8, /*priority=*/5);
    h.step();
    h.step();
    const uint64_t high = h.submit(iota_tokens(5, 50), 3, /*priority=*/0);
    h.step(); // the only slot goes to the better priority: the running one is preempted
    ASSERT_EQ(h.scheduler->running().size(), 1u);
    EXPECT_EQ(h.scheduler->running()[0]->arrival, high);
    h.run_to_end();
    h.check_outputs();
    EXPECT_GE(h.scheduler->stats().preemptions, 1);
    (void)low;
    // Equal priorities run in arrival order: no preemption among them.
    Harness fifo(config(1, 16, 8), 64, 4, 0, 0);
    fifo.submit(iota_tokens(5, 1), 4);
    fifo.step();
    fifo.submit(iota_tokens(5, 9), 4);
    fifo.run_to_end();
    EXPECT_EQ(fifo.scheduler->stats().preemptions, 0);
    fifo.check_outputs();
}

TEST(Scheduler, PrefixHitsResumeAtTheDeepestSnapshotWhateverTheLength) {
    // Prompts ending 1, 2 and 15 tokens past a block boundary or a snapshot, sent after a
    // conversation turn whose snapshots (prompt, stride 8, end of generation) are cached.
    for (int64_t extra : {0, 1, 2, 15}) {
        Harness h(config(2, 32, 16, 8), 256, 4, 8, 0);
        const std::vector<int32_t> turn1 = iota_tokens(21, 7);
        const uint64_t first = h.submit(turn1, 5);
        h.run_to_end();
        const std::vector<int32_t> answer = h.outputs[first];
        // Turn 2 extends turn 1 and its answer.
        const std::vector<int32_t> turn2 =
            concat_tokens(concat_tokens(turn1, answer), iota_tokens(extra, 900));
        const uint64_t second = h.submit(turn2, 4);
        h.run_to_end();
        // The end-of-generation snapshot covers turn1 + answer minus its last token.
        const int64_t deepest = int64_t(turn1.size() + answer.size()) - 1;
        EXPECT_EQ(h.cached_tokens[second], std::min<int64_t>(deepest, int64_t(turn2.size()) - 1))
            << "extra " << extra;
        // The same prompt again: its own prompt snapshot (all but the last token).
        const uint64_t again = h.submit(turn2, 4);
        h.run_to_end();
        EXPECT_EQ(h.cached_tokens[again], int64_t(turn2.size()) - 1) << "extra " << extra;
        h.check_outputs();
        h.check_no_leaks();
    }
}

TEST(Scheduler, DecodeSnapshotsLetARetokenizedAnswerResumeBeforeItsFirstDifference) {
    // A chat client sends the answer back as text, which may tokenize differently from the
    // sampled ids: turn 2 holds the answer with its token at `differs` replaced. It resumes at
    // the last decode snapshot at or before turn1 + differs (positions p % 4 == 0), or without
    // decode snapshots at turn 1's own prompt snapshot.
    for (int64_t stride : {0, 4}) {
        for (int64_t differs : {1, 6, 13}) {
            SchedulerConfig c = config(2, 32, 16);
            c.decode_snapshot_stride = stride;
            Harness h(c, 256, 4, 16, 0);
            const std::vector<int32_t> turn1 = iota_tokens(10, 7);
            const uint64_t first = h.submit(turn1, 16);
            h.run_to_end();
            std::vector<int32_t> answer = h.outputs[first];
            answer[size_t(differs)] = 999;
            const uint64_t second =
                h.submit(concat_tokens(concat_tokens(turn1, answer), iota_tokens(3, 900)), 4);
            h.run_to_end();
            const int64_t diverges = int64_t(turn1.size()) + differs;
            const int64_t want = stride ? diverges / stride * stride : int64_t(turn1.size()) - 1;
            EXPECT_EQ(h.cached_tokens[second], std::max<int64_t>(want, int64_t(turn1.size()) - 1))
                << "stride " << stride << ", differs at " << differs;
            h.check_outputs();
            h.check_no_leaks();
        }
    }
}

TEST(Scheduler, NoPrefixCacheMeansNoHits) {
    Harness h(config(2, 32, 16), 64, 4, 0, 0);
    const uint64_t a = h.submit(iota_tokens(20, 3), 3);
    h.run_to_end();
    const uint64_t b = h.submit(iota_tokens(20, 3), 3);
    h.run_to_end();
    EXPECT_EQ(h.cached_tokens[a], 0);
    EXPECT_EQ(h.cached_tokens[b], 0);
    h.check_outputs();
}

// A failed request (finished without a snapshot: non-finite logits) may leave non-finite K/V,
// and attention reads a reused block's rows past its next owner's context: the blocks it alone
// held go back zeroed, the ones the prefix cache shares stay as they are, and a finished request's
// blocks are not touched.
TEST(Scheduler, AFailedRequestsBlocksGoBackZeroed) {
    Harness h(config(2, 32, 16), 64, 4, 4, 2);
    h.submit(iota_tokens(20, 3), 3);
    h.run_to_end();
    h.submit(concat_tokens(iota_tokens(20, 3), iota_tokens(30, 100)), 12);
    // The follow-up resumes from the shared prefix, then decodes past its last snapshot.
    while (h.scheduler->running().empty() || h.scheduler->running().front()->generated < 7)
        ASSERT_TRUE(h.step());
    Sequence& failed = *h.scheduler->running().front();
    const std::vector<int32_t> blocks = failed.blocks;
    ASSERT_GE(blocks.size(), 3u);
    const int64_t free_before = h.manager.free_blocks();
    const CacheOps ops = h.scheduler->finish(failed, /*snapshot=*/false);
    std::set<int32_t> zeroed;
    for (const CacheOp& op : ops)
        if (op.kind == CacheOp::Kind::ZeroBlock) zeroed.insert(op.dst);
    // Exactly the blocks that went free: not the prefix's full blocks, which the cache keeps.
    EXPECT_EQ(int64_t(zeroed.size()), h.manager.free_blocks() - free_before);
    EXPECT_GT(zeroed.size(), 0u);
    EXPECT_LT(zeroed.size(), blocks.size());
    for (int32_t b : zeroed)
        EXPECT_NE(std::find(blocks.begin(), blocks.end(), b), blocks.end()) << "block " << b;
    h.run(ops);
    for (int32_t b : zeroed)
        EXPECT_EQ(h.kv[size_t(b)], std::vector<int32_t>(size_t(h.block_size), kZeroedEntry));
    h.scheduler->collect();
    // A request that ends normally leaves its blocks as they are.
    h.submit(iota_tokens(40, 500), 2);
    for (int i = 0; i < 2; ++i) h.step();
    ASSERT_EQ(h.scheduler->running().size(), 1u);
    for (const CacheOp& op : h.scheduler->finish(*h.scheduler->running().front(), true))
        EXPECT_NE(op.kind, CacheOp::Kind::ZeroBlock);
}

TEST(Scheduler, CancellationAtEveryStageLeaksNothing) {
    for (int cancel_at = 0; cancel_at < 8; ++cancel_at) {
        Harness h(config(2, 6, 4, 4), 32, 4, 4, 2);
        for (int r = 0; r < 4; ++r) h.submit(iota_tokens(9, 10 * r), 6);
        for (int i = 0; i < cancel_at; ++i) h.step();
        // Cancel one waiting and one running request, wherever they are.
        if (!h.scheduler->waiting().empty()) h.finish(*h.scheduler->waiting().back(), true);
        if (!h.scheduler->running().empty()) h.finish(*h.scheduler->running().front(), true);
        h.scheduler->collect();
        h.run_to_end();
        h.check_outputs();
        h.check_no_leaks();
    }
}

// Random traffic under tight memory: shared system prompts, multi-turn follow-ups, priorities,
// cancellations; few slots, blocks, snapshot rows and host buffers, so admission, preemption,
// eviction and the host tier all happen. Every output must equal the solo run.
TEST(Scheduler, RandomTrafficUnderPressureGivesSoloOutputs) {
    for (uint32_t seed : {1u, 2u, 3u}) {
        std::mt19937 gen(seed);
        Harness h(config(3, 10, 6, 8), 40, 4, 3, 2);
        std::vector<std::vector<int32_t>> systems;
        for (int i = 0; i < 3; ++i) systems.push_back(iota_tokens(int64_t(gen() % 20), 1000 * i));
        std::vector<std::vector<int32_t>> finished_convs;
        for (int round = 0; round < 60; ++round) {
            const int kind = int(gen() % 3);
            std::vector<int32_t> prompt;
            if (kind == 2 && !finished_convs.empty()) // a follow-up turn
                prompt = finished_convs[gen() % finished_convs.size()];
            else
                prompt = systems[gen() % systems.size()];
            prompt = concat_tokens(prompt, iota_tokens(1 + int64_t(gen() % 12), int32_t(gen() % 500)));
            if (prompt.size() > 100) prompt.resize(100);
            const uint64_t id = h.submit(prompt, 1 + int64_t(gen() % 20), int(gen() % 3));
            for (int k = 0; k < int(gen() % 6); ++k) h.step();
            if (gen() % 10 == 0 && !h.scheduler->running().empty()) {
                h.finish(*h.scheduler->running()[gen() % h.scheduler->running().size()], true);
                h.scheduler->collect();
            }
            if (::testing::Test::HasFatalFailure()) return;
            if (h.outputs.count(id) && !h.cancelled_ids.count(id))
                finished_convs.push_back(concat_tokens(prompt, h.outputs[id]));
        }
        h.run_to_end();
        h.check_outputs();
        const auto& st = h.scheduler->stats();
        EXPECT_GT(st.prefix_hit_tokens, 0) << "seed " << seed;
        EXPECT_GT(st.preemptions, 0) << "seed " << seed;
        EXPECT_GT(h.snapshots->on_host() + st.prefix_hit_tokens, 0);
        h.check_no_leaks();
    }
}

// ---- memory plan --------------------------------------------------------------------------------

TEST(MemoryPlan, SplitsTheBudgetAndHonoursExplicitCounts) {
    runtime::MemoryPlanInput in;
    in.budget_bytes = int64_t(1) << 30;
    in.kv_bytes_per_token = 1024;
    in.state_bytes_per_row = int64_t(1) << 20;
    in.max_context = 4096;
    in.block_size = 16;
    const runtime::MemoryPlan auto_plan = runtime::plan_memory(in);
    EXPECT_EQ(auto_plan.sequences, 256); // 256 MiB of the 1 GiB budget
    EXPECT_GT(auto_plan.snapshot_rows, 0);
    const int64_t used = (auto_plan.sequences + 1 + auto_plan.snapshot_rows) * in.state_bytes_per_row +
                         (auto_plan.kv_blocks + 1) * 16 * in.kv_bytes_per_token;
    EXPECT_LE(used, in.budget_bytes);
    EXPECT_GT(used, in.budget_bytes - 16 * in.kv_bytes_per_token); // KV takes the rest
    in.sequences = 8;
    in.snapshots = 4;
    const runtime::MemoryPlan fixed = runtime::plan_memory(in);
    EXPECT_EQ(fixed.sequences, 8);
    EXPECT_EQ(fixed.snapshot_rows, 4);
    in.prefix_cache = false;
    EXPECT_EQ(runtime::plan_memory(in).snapshot_rows, 0);
}

// The server's warm request of a chat turn (prefill_only, the lowest priority) that is still
// waiting when its follow-up, which extends it, is admitted is marked superseded and never
// admitted (the follow-up computes those tokens now); a warm the admitted prompt does not extend
// is kept. The sabotage of the rule (no marking) would admit the warm next.
TEST(Scheduler, AdmittedFollowUpSupersedesItsWaitingWarm) {
    Harness h(config(4, 64, 64), 64, 4, 4, 0);
    const std::vector<int32_t> history = iota_tokens(12, 100);
    auto add = [&](std::vector<int32_t> prompt, int priority, bool warm) {
        auto seq = std::make_unique<Sequence>();
        seq->request.prompt = prompt;
        seq->request.max_new_tokens = warm ? 0 : 4;
        seq->request.prefill_only = warm;
        seq->request.priority = priority;
        seq->tokens = std::move(prompt);
        seq->arrival = h.next_arrival++;
        Sequence* raw = seq.get();
        h.scheduler->add(std::move(seq));
        return raw;
    };
    Sequence* warm = add(history, std::numeric_limits<int>::max(), true);
    Sequence* other = add(iota_tokens(8, 500), std::numeric_limits<int>::max(), true);
    Sequence* follow = add(concat_tokens(history, iota_tokens(5, 300)), 0, false);
    const Scheduler::Step st = h.scheduler->schedule();
    EXPECT_GE(follow->slot, 0);
    EXPECT_TRUE(warm->superseded);
    EXPECT_LT(warm->slot, 0) << "the superseded warm was admitted";
    EXPECT_FALSE(other->superseded);
    for (const auto& e : st.plan.entries) EXPECT_NE(e.seq, warm);
}

TEST(MemoryPlan, CpuDefaultsKeepSeveralSnapshotsPerSlotWithinTheirBytes) {
    runtime::MemoryPlanInput in; // no budget: the CPU
    in.kv_bytes_per_token = 1024;
    in.max_context = 4096;
    in.block_size = 16;
    in.state_bytes_per_row = int64_t(1) << 20; // small state: 8 per slot
    runtime::MemoryPlan plan = runtime::plan_memory(in);
    EXPECT_EQ(plan.sequences, runtime::kCpuSequences);
    EXPECT_EQ(plan.snapshot_rows, runtime::kCpuSnapshotsPerSequence * runtime::kCpuSequences);
    in.state_bytes_per_row = int64_t(128) << 20; // 4 GiB hold 32 rows
    EXPECT_EQ(runtime::plan_memory(in).snapshot_rows, 32);
    in.state_bytes_per_row = int64_t(1) << 30; // never fewer than one per slot
    EXPECT_EQ(runtime::plan_memory(in).snapshot_rows, runtime::kCpuSequences);
    in.snapshots = 5;
    EXPECT_EQ(runtime::plan_memory(in).snapshot_rows, 5);
}

TEST(MemoryPlan, ConfigurationsThatCannotFitSayWhatToChange) {
    runtime::MemoryPlanInput in;
    in.budget_bytes = int64_t(64) << 20;
    in.kv_bytes_per_token = 1024;
    in.state_bytes_per_row = int64_t(1) << 20;
    in.max_context = 262144; // 256 MiB of KV for one sequence
    EXPECT_TRUE(raises([&] { runtime::plan_memory(in); }, {"--max-context"},
                       ErrorCategory::OutOfMemory));
    in.max_context = 1024;
    in.sequences = 200; // 200 MiB of state
    EXPECT_TRUE(raises([&] { runtime::plan_memory(in); }, {"--max-sequences"},
                       ErrorCategory::OutOfMemory));
}

TEST(MemoryPlan, CpuDefaults) {
    runtime::MemoryPlanInput in; // no budget
    in.kv_bytes_per_token = 64;
    in.state_bytes_per_row = 4096;
    in.max_context = 1000;
    in.block_size = 16;
    const runtime::MemoryPlan p = runtime::plan_memory(in);
    EXPECT_EQ(p.sequences, runtime::kCpuSequences);
    EXPECT_EQ(p.kv_blocks, 63 * runtime::kCpuFullContexts);
}

} // namespace
} // namespace ninfer::test
