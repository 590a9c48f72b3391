// The multi-GPU placement planners (runtime/placement.h) on the published Qwen3.6 configs: the
// split moves every post-attention block off device 0 (the bytes add up to one device's, layer
// runs cover each layer once) and turns the freed memory into KV; tensor parallelism gives each
// rank its share of heads, rows and experts (the ranks' bytes less the copies add up to one
// device's; KV and GDN state per token divide with their heads, KV heads copied past their
// count); layouts the config cannot divide, too few devices and too little memory are errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "common/test_util.h"
#include "core/error.h"
#include "io/hf_config.h"
#include "model/param_count.h"
#include "runtime/placement.h"

namespace ninfer::runtime {
namespace {

namespace fs = std::filesystem;

io::ModelConfig published(const std::string& name) {
    return io::load_hf_config(fs::path(test::fixtures_dir()).parent_path().parent_path() /
                              "configs" / name);
}

PlacementRequest h200(PlacementMode mode, int devices) {
    PlacementRequest r;
    r.mode = mode;
    r.devices = devices;
    r.device_bytes = int64_t(141) * 1000 * 1000 * 1000; // an H200
    r.utilization = 0.9;
    r.workspace_bytes = int64_t(4) << 30;
    r.sequences = 8;
    return r;
}

int64_t single_weights(const io::ModelConfig& c) {
    const model::ParamCounts p = model::count_params(c, 0);
    return (p.text_total + p.mtp) * 2;
}

TEST(Placement, SplitMovesThePostAttentionBlocksAndFreesDeviceZeroForKv) {
    for (const char* name : {"qwen3.6-35b-a3b.json", "qwen3.6-27b.json"}) {
        SCOPED_TRACE(name);
        const io::ModelConfig c = published(name);
        const PlacementRequest r = h200(PlacementMode::Split, 2);
        const PlacementPlan plan = plan_placement(c, r);
        ASSERT_EQ(plan.devices.size(), 2u);
        // Nothing lost or counted twice.
        EXPECT_EQ(plan.devices[0].weight_bytes + plan.devices[1].weight_bytes, single_weights(c));
        // The MLP device holds every layer's post-attention block: MLP params + one norm.
        const model::ParamCounts p = model::count_params(c, 0);
        EXPECT_EQ(plan.devices[1].weight_bytes, (p.mlp + c.num_layers * c.hidden_size) * 2);
        EXPECT_EQ(plan.devices[1].kv_bytes_per_token, 0);
        EXPECT_EQ(plan.devices[0].kv_bytes_per_token,
                  model::kv_bytes_per_token(c, ops::KvDtype::Activation, DType::BF16));
        EXPECT_EQ(plan.limiting_device, 0);
        const int64_t single = single_device_kv_tokens(c, r);
        EXPECT_GT(plan.kv_tokens, single);
        // KV capacity from device 0's free bytes after its weights and the state of 8 sequences.
        EXPECT_EQ(plan.kv_tokens,
                  (plan.devices[0].free_bytes - 8 * plan.devices[0].state_bytes_per_sequence) /
                      plan.devices[0].kv_bytes_per_token);
        std::printf("%s split: device 0 %.1f GB, device 1 %.1f GB; KV %lld tokens against %lld "
                    "on one device (%.2fx)\n",
                    name, plan.devices[0].weight_bytes / 1e9, plan.devices[1].weight_bytes / 1e9,
                    static_cast<long long>(plan.kv_tokens), static_cast<long long>(single),
                    double(plan.kv_tokens) / double(single));
    }
}

TEST(Placement, SplitOverSeveralDevicesCoversEachLayerOnce) {
    const io::ModelConfig c = published("qwen3.6-35b-a3b.json");
    const PlacementPlan plan = plan_placement(c, h200(PlacementMode::Split, 4));
    ASSERT_EQ(plan.devices.size(), 4u);
    int64_t total = 0;
    for (const DevicePlan& d : plan.devices) total += d.weight_bytes;
    EXPECT_EQ(total, single_weights(c));
    // Devices 1..3 hold 40 layers as contiguous runs: 0..12, 13..25, 26..39.
    std::vector<std::string> runs;
    for (const TensorHome& t : plan.tensors)
        if (t.rank > 0) runs.push_back(t.group.substr(0, t.group.find(':')));
    EXPECT_EQ(runs, (std::vector<std::string>{"layers 0..12", "layers 13..25", "layers 26..39"}));
}

// What every rank holds a copy of, by the planner's own rules, counted from the config here.
int64_t copied_bytes(const io::ModelConfig& c) {
    const int64_t H = c.hidden_size;
    int64_t n = c.vocab_size * H + H + c.num_layers * 2 * H; // embedding, final and layer norms
    if (c.moe) n += c.num_layers * (c.num_experts + 1) * H;  // router + shared-expert gate
    n += c.count_layers(io::LayerKind::LinearAttention) * c.linear_value_head_dim; // gated norm
    n += c.count_layers(io::LayerKind::FullAttention) * 2 * c.head_dim;            // q/k norms
    return n * 2;
}

TEST(Placement, TensorParallelGivesEachRankItsShare) {
    for (const char* name : {"qwen3.6-35b-a3b.json", "qwen3.6-27b.json"}) {
        SCOPED_TRACE(name);
        const io::ModelConfig c = published(name);
        const PlacementRequest r = h200(PlacementMode::Tensor, 2);
        const PlacementPlan plan = plan_placement(c, r);
        ASSERT_EQ(plan.devices.size(), 2u);
        // Two ranks of the same bytes; together, less one set of copies, one device's weights
        // (2 KV heads or more: none copied at N = 2; the vocabulary splits evenly).
        EXPECT_EQ(plan.devices[0].weight_bytes, plan.devices[1].weight_bytes);
        EXPECT_EQ(2 * plan.devices[0].weight_bytes - copied_bytes(c), single_weights(c));
        EXPECT_EQ(2 * plan.devices[0].kv_bytes_per_token,
                  model::kv_bytes_per_token(c, ops::KvDtype::Activation, DType::BF16));
        EXPECT_EQ(2 * plan.devices[0].state_bytes_per_sequence,
                  model::gdn_state_bytes_per_sequence(c, 2));
        const int64_t single = single_device_kv_tokens(c, r);
        EXPECT_GT(plan.kv_tokens, 2 * single); // each token costs half, and weights halve too
        // Rank r holds the r-th half of the query heads, the key heads and the rows.
        std::set<std::string> shares;
        for (const TensorHome& t : plan.tensors) shares.insert(t.share);
        const std::string half = std::to_string(c.num_heads / 2);
        EXPECT_TRUE(shares.count("query heads 0.." + std::to_string(c.num_heads / 2 - 1) +
                                 " of " + std::to_string(c.num_heads) + ", KV heads 0.." +
                                 std::to_string(c.num_kv_heads / 2 - 1) + " of " +
                                 std::to_string(c.num_kv_heads)))
            << *shares.begin();
        std::printf("%s TP=2: %.1f GB a rank; KV %lld tokens against %lld on one device\n", name,
                    plan.devices[0].weight_bytes / 1e9, static_cast<long long>(plan.kv_tokens),
                    static_cast<long long>(single));
    }
}

TEST(Placement, TensorParallelPastTheKvHeadsCopiesThem) {
    const io::ModelConfig c = published("qwen3.6-27b.json"); // 4 KV heads
    const PlacementPlan plan = plan_placement(c, h200(PlacementMode::Tensor, 8));
    const int64_t one = model::kv_bytes_per_token(c, ops::KvDtype::Activation, DType::BF16);
    for (const DevicePlan& d : plan.devices) EXPECT_EQ(d.kv_bytes_per_token, one / 4);
    bool found = false;
    for (const TensorHome& t : plan.tensors)
        found = found || t.share == "query heads 21..23 of 24, KV heads 3..3 of 4";
    EXPECT_TRUE(found) << "rank 7 reads KV head 3";
}

TEST(Placement, LayoutsThatCannotWorkAreClearErrors) {
    const io::ModelConfig c = published("qwen3.6-27b.json"); // 24 heads, 4 KV heads
    auto expect_error = [&](PlacementRequest r, const std::string& text) {
        try {
            plan_placement(c, r);
            ADD_FAILURE() << "no error for " << text;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
        }
    };
    expect_error(h200(PlacementMode::Tensor, 5), "num_attention_heads (24) must divide into 5");
    expect_error(h200(PlacementMode::Tensor, 3), "num_key_value_heads (4) must divide into 3");
    expect_error(h200(PlacementMode::Split, 1), "the split needs two devices or more");
    PlacementRequest small = h200(PlacementMode::Split, 2);
    small.device_bytes = int64_t(28) * 1000 * 1000 * 1000; // the 27B's mixers fit, not its MLP
    expect_error(small, "device 1 cannot hold its weights");
    small.device_bytes = int64_t(1) << 30;
    expect_error(small, "device 0 cannot hold its weights");
}

} // namespace
} // namespace ninfer::runtime
