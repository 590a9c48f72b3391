#include "runtime/placement.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "core/error.h"
#include "model/tensor_parallel.h"
#include "model/param_count.h"

namespace ninfer::runtime {
namespace {

using io::LayerKind;
using io::ModelConfig;

constexpr int64_t kBf16 = 2; // bytes a weight

std::string range_text(const char* what, int64_t begin, int64_t end, int64_t of) {
    return concat(what, " ", begin, "..", end - 1, " of ", of);
}

// Fills each device's budget and free bytes and the plan's KV capacity.
void fit(PlacementPlan& plan, const PlacementRequest& r) {
    const int64_t budget =
        int64_t(double(r.device_bytes) * r.utilization) - r.workspace_bytes;
    plan.kv_tokens = std::numeric_limits<int64_t>::max();
    for (size_t d = 0; d < plan.devices.size(); ++d) {
        DevicePlan& dev = plan.devices[d];
        dev.budget_bytes = budget;
        dev.free_bytes = budget - dev.weight_bytes;
        if (dev.free_bytes < 0)
            fail_invalid("device ", d, " cannot hold its weights: ", dev.weight_bytes,
                         " bytes against a budget of ", budget,
                         " (memory x utilization - workspace); add devices or memory");
        if (dev.kv_bytes_per_token == 0) continue;
        const int64_t state = int64_t(r.sequences) * dev.state_bytes_per_sequence;
        const int64_t tokens = (dev.free_bytes - state) / dev.kv_bytes_per_token;
        if (tokens <= 0)
            fail_invalid("device ", d, " has no room for KV: ", dev.free_bytes,
                         " bytes free after its weights, ", state, " taken by the state of ",
                         r.sequences, " sequences");
        if (tokens < plan.kv_tokens) {
            plan.kv_tokens = tokens;
            plan.limiting_device = int(d);
        }
    }
}

PlacementPlan plan_split(const ModelConfig& c, const PlacementRequest& r) {
    require(r.devices >= 2, "--devices: the split needs two devices or more, got ", r.devices);
    const model::LayerParamParts lp = model::layer_param_parts(c);
    const model::ParamCounts counts = model::count_params(c, r.mtp_layers);
    const int64_t L = c.num_layers, mlp_devices = r.devices - 1;
    require(mlp_devices <= L, "--devices: ", r.devices, " devices for ", L, " layers");
    PlacementPlan plan;
    plan.mode = PlacementMode::Split;
    plan.devices.resize(size_t(r.devices));
    const Size post_block = lp.mlp_rows + lp.experts + lp.router + Size(c.hidden_size);
    const int64_t mlp_all = int64_t(post_block * L);
    // Device 0: everything but the post-attention blocks.
    const int64_t first = (int64_t(Size(counts.text_total) + counts.mtp) - mlp_all) * kBf16;
    plan.devices[0].weight_bytes = first;
    plan.devices[0].kv_bytes_per_token =
        model::kv_bytes_per_token(c, r.kv_dtype, DType::BF16);
    plan.devices[0].state_bytes_per_sequence =
        model::gdn_state_bytes_per_sequence(c, kBf16, r.gdn_state_element_bytes);
    plan.tensors.push_back({"embed_tokens, lm_head, final norm, every layer's token mixer and "
                            "input norm, MTP; all KV and GDN state",
                            0, "all", first});
    const std::vector<int> on = split_layer_devices(L, int(mlp_devices));
    for (int64_t d = 0; d < mlp_devices; ++d) {
        const int64_t begin = std::find(on.begin(), on.end(), int(d)) - on.begin();
        const int64_t end = std::find(on.rbegin(), on.rend(), int(d)).base() - on.begin();
        const int64_t bytes = int64_t(post_block * (end - begin)) * kBf16;
        plan.devices[size_t(d + 1)].weight_bytes = bytes;
        plan.tensors.push_back({concat("layers ", begin, "..", end - 1,
                                       ": post-attention norm and ", c.moe ? "MoE" : "MLP"),
                                int(d + 1), "all", bytes});
    }
    fit(plan, r);
    return plan;
}

PlacementPlan plan_tensor(const ModelConfig& c, const PlacementRequest& r) {
    const int64_t N = r.devices;
    require(N >= 2, "--tensor-parallel needs two ranks or more, got ", N);
    // A rank's shapes, by the executed layout's rules (model/tensor_parallel.h): its errors name
    // the count that does not divide.
    const model::ParallelLayout layout{int(N), r.expert_parallel};
    const ModelConfig s = model::shard_config(c, layout);
    const model::LayerParamParts lp = model::layer_param_parts(c);
    const Size H = c.hidden_size, V = c.vocab_size;
    const int64_t kv_per_rank = s.num_kv_heads;
    const int64_t attn_layers = c.count_layers(LayerKind::FullAttention);
    const int64_t gdn_layers = c.count_layers(LayerKind::LinearAttention);
    const Size kv_share = Size(2) * kv_per_rank * c.head_dim * H;
    const Size attention = lp.attention_q_o / N + kv_share + lp.attention_norms;
    const Size gdn = lp.gdn_split / N + lp.gdn_norm;
    // Expert parallelism: the rank with the most experts (runs differ by one at most).
    const Size experts = r.expert_parallel
                             ? lp.experts / c.num_experts * ((c.num_experts + N - 1) / N)
                             : lp.experts / N;
    const Size mlp = lp.mlp_rows / N + experts + lp.router;
    const int64_t vocab_rows = (c.vocab_size + N - 1) / N;
    const Size head = c.tie_word_embeddings ? Size(0) : Size(vocab_rows) * H;
    Size mtp;
    if (r.mtp_layers > 0)
        mtp = Size(2) * H * H + Size(3) * H + Size(r.mtp_layers) * (attention + mlp + lp.norms);
    const Size per_rank = V * H + head + H + Size(attn_layers) * attention +
                          Size(gdn_layers) * gdn + Size(c.num_layers) * (mlp + lp.norms) + mtp;
    PlacementPlan plan;
    plan.mode = PlacementMode::Tensor;
    plan.devices.resize(size_t(N));
    const int64_t row_bytes = ops::kv_row_bytes(r.kv_dtype, DType::BF16, c.head_dim);
    const int64_t conv_share = s.conv_dim(), value_heads = s.linear_num_value_heads;
    for (DevicePlan& d : plan.devices) {
        d.weight_bytes = int64_t(per_rank) * kBf16;
        d.kv_bytes_per_token = attn_layers * 2 * kv_per_rank * row_bytes;
        d.state_bytes_per_sequence =
            gdn_layers * (conv_share * (c.linear_conv_kernel - 1) * kBf16 +
                          value_heads * c.linear_key_head_dim * c.linear_value_head_dim *
                              r.gdn_state_element_bytes);
    }
    for (int64_t rank = 0; rank < N; ++rank) {
        const int64_t q = s.num_heads;
        const model::RankRange k = model::shared_heads(c.linear_num_key_heads, int(rank), int(N));
        const model::RankRange kv = model::shared_heads(c.num_kv_heads, int(rank), int(N));
        plan.tensors.push_back(
            {"attention: query heads with their KV heads; o_proj columns", int(rank),
             concat(range_text("query heads", rank * q, (rank + 1) * q, c.num_heads), ", ",
                    range_text("KV heads", kv.begin, kv.begin + kv.count, c.num_kv_heads)),
             int64_t(Size(attn_layers) * attention) * kBf16});
        plan.tensors.push_back(
            {"GDN: key heads with their value heads, conv channels and state; out_proj columns",
             int(rank), range_text("key heads", k.begin, k.begin + k.count, c.linear_num_key_heads),
             int64_t(Size(gdn_layers) * gdn) * kBf16});
        const int64_t rows = c.moe ? c.shared_expert_intermediate_size : c.intermediate_size;
        const int64_t e = c.moe_intermediate_size;
        const ModelConfig mine = model::shard_config(c, layout, int(rank));
        std::string routed;
        if (c.moe && r.expert_parallel)
            routed = range_text("experts", mine.first_held_expert,
                                mine.first_held_expert + mine.held_experts(), c.num_experts) +
                     " whole, ";
        else if (c.moe)
            routed = range_text("expert rows", rank * e / N, (rank + 1) * e / N, e) + ", ";
        plan.tensors.push_back(
            {!c.moe                ? "MLP: gate/up rows and down columns"
             : r.expert_parallel ? "MoE: a run of whole routed experts and the shared expert's "
                                   "rows (router copied)"
                                 : "MoE: every routed expert's rows and the shared expert's "
                                   "(router copied)",
             int(rank), routed + range_text("rows", rank * rows / N, (rank + 1) * rows / N, rows),
             int64_t(Size(c.num_layers) * mlp) * kBf16});
        if (!c.tie_word_embeddings)
            plan.tensors.push_back(
                {"lm_head: vocabulary rows", int(rank),
                 range_text("rows", rank * vocab_rows,
                            std::min<int64_t>(c.vocab_size, (rank + 1) * vocab_rows),
                            c.vocab_size),
                 int64_t(head) * kBf16});
    }
    plan.tensors.push_back({"embed_tokens, norms", -1, "all",
                            int64_t(V * H + H + Size(c.num_layers) * lp.norms) * kBf16});
    fit(plan, r);
    return plan;
}

} // namespace

std::vector<int> split_layer_devices(int64_t layers, int mlp_devices) {
    require(mlp_devices >= 1 && mlp_devices <= layers, "--devices: ", mlp_devices + 1,
            " devices for ", layers, " layers");
    std::vector<int> on(size_t(layers), 0);
    for (int d = 0; d < mlp_devices; ++d)
        for (int64_t l = layers * d / mlp_devices; l < layers * (d + 1) / mlp_devices; ++l)
            on[size_t(l)] = d;
    return on;
}

PlacementPlan plan_placement(const ModelConfig& c, const PlacementRequest& r) {
    require(r.device_bytes > 0, "placement: the device memory must be positive");
    require(r.utilization > 0 && r.utilization <= 1, "placement: utilization outside (0, 1]");
    require(r.sequences >= 1, "placement: at least one sequence slot");
    return r.mode == PlacementMode::Split ? plan_split(c, r) : plan_tensor(c, r);
}

int64_t single_device_kv_tokens(const ModelConfig& c, const PlacementRequest& r) {
    const model::ParamCounts counts = model::count_params(c, r.mtp_layers);
    PlacementPlan plan;
    plan.devices.resize(1);
    plan.devices[0].weight_bytes = (counts.text_total + counts.mtp) * kBf16;
    plan.devices[0].kv_bytes_per_token = model::kv_bytes_per_token(c, r.kv_dtype, DType::BF16);
    plan.devices[0].state_bytes_per_sequence =
        model::gdn_state_bytes_per_sequence(c, kBf16, r.gdn_state_element_bytes);
    fit(plan, r);
    return plan.kv_tokens;
}

} // namespace ninfer::runtime
