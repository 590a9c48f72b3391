// The DFlash / DFlash2 drafter forward against its PyTorch reference (tools/dflash/reference.py),
// logit by logit: tools/dflash/make_oracle.py wrote a random drafter in z-lab's layout, context
// features, the target's embedding and head, and the reference's mask-row hidden states and
// logits of one round [anchor, MASK x K] after F context positions. ninfer loads the drafter as
// it loads a download, writes the context into its paged KV (write_context), runs the block
// (propose, every layer's key spans from span_for) on the reference ops, and must reproduce the
// hidden rows and logits. Cases: tests/fixtures_dflash/* (fixture-sized, CI) and any case
// directory listed in NINFER_DFLASH_ORACLE_DIRS (colon-separated; the real drafter shapes, made
// with make_oracle.py --config configs/dflash/...: too large to commit).
// Sabotage arm: the same round with the context features of one position changed must miss the
// reference (the comparison sees the context, not only the block).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "common/tolerance.h"
#include "io/safetensors.h"
#include "model/dflash.h"
#include "ops/dflash.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "runtime/kv_pool.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> oracle_cases() {
    std::vector<fs::path> dirs;
    const fs::path root = fs::path(fixtures_dir()).parent_path() / "fixtures_dflash";
    for (const auto& e : fs::directory_iterator(root))
        if (fs::exists(e.path() / "oracle" / "oracle.json")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    if (const char* extra = std::getenv("NINFER_DFLASH_ORACLE_DIRS")) {
        std::stringstream list(extra);
        for (std::string d; std::getline(list, d, ':');)
            if (!d.empty()) dirs.emplace_back(d);
    }
    return dirs;
}

// A tensor of the case's reference (F32 values, or the I32 walk).
template <typename T>
std::vector<T> reference_of(const fs::path& dir, const char* name) {
    const io::SafetensorsCheckpoint oracle = io::SafetensorsCheckpoint::open(dir / "oracle");
    const io::TensorEntry* e = oracle.find(name);
    EXPECT_NE(e, nullptr) << name << " missing: regenerate with tools/dflash/make_oracle.py";
    if (!e) return {};
    std::vector<T> v(size_t(e->numel()));
    std::memcpy(v.data(), e->data, v.size() * sizeof(T));
    return v;
}

struct Round {
    int64_t K = 0, V = 0;
    std::vector<float> hidden; // [K, H]
    std::vector<float> logits; // [K, V]
    std::vector<int32_t> walk; // DFlash2: the selector's greedy path [K]
};

// DFlash2's selector walk (ops::dflash_select, greedy) over each row's top-k logits (ties: lower
// id first, as the drafter's top-k), from the anchor.
std::vector<int32_t> greedy_walk(const ops::ExecContext& ctx, const model::DFlashModel& d,
                                 std::vector<float>& hidden, const std::vector<float>& logits,
                                 int64_t K, int64_t V, int32_t anchor) {
    const model::DFlashConfig& c = d.config();
    const int64_t k = c.selector_top_k, R = c.selector_rank, H = c.hidden_size;
    std::vector<float> unary(size_t(K * k));
    std::vector<int32_t> cand(size_t(K * k));
    for (int64_t r = 0; r < K; ++r) {
        std::vector<int32_t> ids(static_cast<size_t>(V));
        for (int64_t i = 0; i < V; ++i) ids[size_t(i)] = int32_t(i);
        const float* row = logits.data() + r * V;
        std::stable_sort(ids.begin(), ids.end(),
                         [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        for (int64_t j = 0; j < k; ++j) {
            cand[size_t(r * k + j)] = ids[size_t(j)];
            unary[size_t(r * k + j)] = row[ids[size_t(j)]];
        }
    }
    std::vector<float> g(size_t(K * R)), q(size_t(K * k));
    ops::linear(ctx, TensorView::contiguous(hidden.data(), DType::F32, Device::cpu(), {K, H}),
                d.weights().selector_proj,
                TensorView::contiguous(g.data(), DType::F32, Device::cpu(), {K, R}));
    std::vector<int32_t> path(static_cast<size_t>(K));
    ops::dflash_select(ctx, TensorView::contiguous(unary.data(), DType::F32, Device::cpu(), {1, K, k}),
                       TensorView::contiguous(cand.data(), DType::I32, Device::cpu(), {1, K, k}),
                       TensorView::contiguous(g.data(), DType::F32, Device::cpu(), {1, K, R}),
                       d.weights().predecessor, d.weights().successor,
                       TensorView::contiguous(&anchor, DType::I32, Device::cpu(), {1}),
                       TensorView(), 0.0f,
                       TensorView::contiguous(path.data(), DType::I32, Device::cpu(), {1, K}),
                       TensorView::contiguous(q.data(), DType::F32, Device::cpu(), {1, K, k}));
    return path;
}

// One proposal round of the drafter in `dir` on the case's inputs (features possibly altered).
Round run_round(const fs::path& dir, const std::vector<float>* features_override = nullptr) {
    const ops::ExecContext ctx = ops::ExecContext::cpu(ops::CpuMode::Reference);
    std::ifstream in(dir / "oracle" / "oracle.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    const int64_t K = j["K"], F = j["context"];
    const io::SafetensorsCheckpoint oracle = io::SafetensorsCheckpoint::open(dir / "oracle");
    const TensorView embed = oracle.find("embed")->view(), head = oracle.find("lm_head")->view();
    const int64_t V = embed.size(0), H = embed.size(1);
    io::ModelConfig target;
    target.hidden_size = H;
    target.vocab_size = V;
    target.num_layers = j["target_layers"];
    std::unique_ptr<model::DFlashModel> d = model::DFlashModel::load(dir, target, ctx);
    const model::DFlashConfig& c = d->config();
    const int64_t taps = int64_t(c.target_layers.size());
    std::vector<float> features =
        features_override ? *features_override : reference_of<float>(dir, "features");
    require(int64_t(features.size()) == F * taps * H, "oracle: features for another drafter");

    // The drafter's KV: one sequence, blocks 0.. for positions 0 .. F + K.
    constexpr int32_t kBlock = 16;
    model::CacheSpec spec;
    spec.draft_layers = c.num_layers;
    spec.draft_kv_heads = c.num_kv_heads;
    spec.draft_head_dim = c.head_dim;
    const int32_t blocks = int32_t((F + K + 1 + kBlock - 1) / kBlock);
    runtime::KvPool kv(spec, blocks, kBlock, ctx, ctx.dtype);
    model::CacheViews caches;
    const auto& draft = kv.draft_views();
    for (size_t i = 0; i + 1 < draft.size(); i += 2) {
        caches.draft_k_cache.push_back(draft[i]);
        caches.draft_v_cache.push_back(draft[i + 1]);
    }
    std::vector<int32_t> table(static_cast<size_t>(blocks)), slot{0};
    for (int32_t b = 0; b < blocks; ++b) table[size_t(b)] = b;
    auto seq_batch = [&](int32_t rows, int32_t pos, std::vector<int32_t>& row_begin,
                         std::vector<int32_t>& pos_begin) {
        row_begin = {0, rows};
        pos_begin = {pos};
        ops::SeqBatch s;
        s.num_seqs = 1;
        s.num_rows = rows;
        s.max_rows_per_seq = rows;
        s.max_context = pos + rows;
        s.host_row_begin = row_begin.data();
        s.host_pos_begin = pos_begin.data();
        s.host_state_slot = slot.data();
        s.host_block_table = table.data();
        s.block_table_stride = blocks;
        s.block_size = kBlock;
        s.row_begin = TensorView::contiguous(row_begin.data(), DType::I32, Device::cpu(), {2});
        s.pos_begin = TensorView::contiguous(pos_begin.data(), DType::I32, Device::cpu(), {1});
        s.state_slot = TensorView::contiguous(slot.data(), DType::I32, Device::cpu(), {1});
        s.block_table =
            TensorView::contiguous(table.data(), DType::I32, Device::cpu(), {1, blocks});
        return s;
    };
    // Context: positions 0 .. F - 1.
    std::vector<int32_t> ctx_pos(static_cast<size_t>(F)), rb0, pb0;
    for (int64_t p = 0; p < F; ++p) ctx_pos[size_t(p)] = int32_t(p);
    d->write_context(ctx,
                     TensorView::contiguous(features.data(), DType::F32, Device::cpu(),
                                            {F, taps * H}),
                     TensorView::contiguous(ctx_pos.data(), DType::I32, Device::cpu(), {F}),
                     seq_batch(int32_t(F), 0, rb0, pb0), caches);
    // The block [anchor, MASK x K] at positions F .. F + K.
    const int64_t W = K + 1;
    std::vector<int32_t> ids(static_cast<size_t>(W), c.mask_token_id), pos(static_cast<size_t>(W));
    std::vector<int32_t> segments{0, int32_t(W)};
    ids[0] = j["anchor"].get<int32_t>();
    for (int64_t i = 0; i < W; ++i) pos[size_t(i)] = int32_t(F + i);
    std::vector<int32_t> rb1, pb1;
    model::DFlashBlocks blocks_in;
    blocks_in.tokens = TensorView::contiguous(ids.data(), DType::I32, Device::cpu(), {W});
    blocks_in.positions = TensorView::contiguous(pos.data(), DType::I32, Device::cpu(), {W});
    blocks_in.seqs = seq_batch(int32_t(W), int32_t(F), rb1, pb1);
    blocks_in.host_segments = segments.data();
    blocks_in.segments = TensorView::contiguous(segments.data(), DType::I32, Device::cpu(), {2});
    // Every layer's key spans (span_for), one SpanBatch a layer.
    std::vector<std::vector<int32_t>> begin(size_t(c.num_layers)), end(size_t(c.num_layers));
    std::vector<int32_t> table_row(size_t(W), 0);
    std::vector<ops::SpanBatch> spans(size_t(c.num_layers));
    std::vector<const ops::SpanBatch*> layer_spans;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        for (int64_t p = F; p < F + W; ++p) {
            const auto [b, e] = d->span_for(l, p, F + K);
            begin[size_t(l)].push_back(b);
            end[size_t(l)].push_back(e);
        }
        ops::SpanBatch& s = spans[size_t(l)];
        s.num_rows = int32_t(W);
        s.host_table_row = table_row.data();
        s.host_key_begin = begin[size_t(l)].data();
        s.host_key_end = end[size_t(l)].data();
        s.host_block_table = table.data();
        s.num_table_rows = 1;
        s.block_table_stride = blocks;
        s.block_size = kBlock;
        s.table_row = TensorView::contiguous(table_row.data(), DType::I32, Device::cpu(), {W});
        s.key_begin =
            TensorView::contiguous(begin[size_t(l)].data(), DType::I32, Device::cpu(), {W});
        s.key_end = TensorView::contiguous(end[size_t(l)].data(), DType::I32, Device::cpu(), {W});
        s.block_table = blocks_in.seqs.block_table;
        layer_spans.push_back(&s);
    }
    model::ModelWeights target_weights;
    target_weights.embed = Tensor(nullptr, embed);
    std::vector<float> out(size_t(W * H));
    d->propose(ctx, blocks_in, layer_spans, caches, target_weights,
               TensorView::contiguous(out.data(), DType::F32, Device::cpu(), {W, H}));
    Round r;
    r.K = K;
    r.V = V;
    r.hidden.assign(out.begin() + H, out.end()); // the mask rows
    r.logits.resize(size_t(K * V));
    ops::linear(ctx, TensorView::contiguous(r.hidden.data(), DType::F32, Device::cpu(), {K, H}),
                head, TensorView::contiguous(r.logits.data(), DType::F32, Device::cpu(), {K, V}));
    for (float& x : r.logits) {
        x *= float(c.output_multiplier);
        if (c.logit_softcap > 0) x = float(std::tanh(x / c.logit_softcap) * c.logit_softcap);
    }
    int32_t anchor = ids[0];
    if (c.v2) r.walk = greedy_walk(ctx, *d, r.hidden, r.logits, K, V, anchor);
    return r;
}

size_t argmax_row(const std::vector<float>& v, size_t row, size_t V) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
        if (v[row * V + i] > v[row * V + best]) best = i;
    return best;
}

TEST(DFlashOracle, DrafterLogitsMatchThePyTorchReference) {
    const std::vector<fs::path> cases = oracle_cases();
    ASSERT_GE(cases.size(), 2u) << "tests/fixtures_dflash holds the DFlash and DFlash2 cases";
    for (const fs::path& dir : cases) {
        SCOPED_TRACE(dir.string());
        const Round got = run_round(dir);
        const std::vector<float> hidden = reference_of<float>(dir, "hidden");
        const std::vector<float> logits = reference_of<float>(dir, "logits");
        ASSERT_EQ(got.logits.size(), logits.size());
        const double h_gap = max_gap_relative(got.hidden, hidden);
        const double l_gap = max_gap_relative(got.logits, logits);
        auto view = [](const std::vector<float>& v) {
            return TensorView::contiguous(const_cast<float*>(v.data()), DType::F32,
                                          Device::cpu(), {int64_t(v.size())});
        };
        EXPECT_TRUE(near(view(got.hidden), view(hidden), kReductionF32)) << "hidden rows";
        EXPECT_TRUE(near(view(got.logits), view(logits), kReductionF32)) << "logits";
        // DFlash drafts each row's argmax: the same ids, where the reference's top two are apart.
        const size_t K = size_t(got.K), V = size_t(got.V);
        for (size_t r = 0; r < K; ++r) {
            std::vector<float> row(logits.begin() + long(r * V), logits.begin() + long((r + 1) * V));
            std::sort(row.rbegin(), row.rend());
            if (row[0] - row[1] > 1e-3f) {
                EXPECT_EQ(argmax_row(got.logits, r, V), argmax_row(logits, r, V)) << "row " << r;
            }
        }
        if (!got.walk.empty()) { // DFlash2: the selector's walk, as the reference's
            EXPECT_EQ(got.walk, reference_of<int32_t>(dir, "walk")) << "the selector's greedy walk";
        }
        std::printf("%s: hidden %.2e, logits %.2e relative%s\n", dir.filename().c_str(), h_gap,
                    l_gap, got.walk.empty() ? "" : ", walk equal");
    }
}

TEST(DFlashOracle, ChangedContextMissesTheReference) {
    const fs::path dir = oracle_cases().front();
    std::vector<float> features = reference_of<float>(dir, "features");
    std::ifstream in(dir / "oracle" / "oracle.json");
    const int64_t F = nlohmann::json::parse(in)["context"];
    const size_t width = features.size() / size_t(F);
    for (size_t i = (size_t(F) - 1) * width; i < features.size(); ++i) // the last position's
        features[i] = -features[i];
    const Round got = run_round(dir, &features);
    EXPECT_GT(max_gap_relative(got.logits, reference_of<float>(dir, "logits")), 1e-3)
        << "the drafter's logits did not depend on its context";
}

} // namespace
} // namespace ninfer::test
