// Placement planning for several GPUs: which weights live on which device, and the KV capacity
// that leaves (the planners of the multi-GPU issue; docs/MULTI_NODE.md for beyond one machine).
// Two layouts:
//   - Split (`--devices 0,1,...`): every layer's post-attention block (its norm and MLP or MoE)
//     lives on the devices after the first, contiguous runs of layers each; device 0 keeps the
//     embedding, every token mixer (attention, GDN), the other norms, the final norm, the head
//     and MTP, and therefore all KV and GDN state. Device 0's freed memory becomes KV.
//   - Tensor (`--tensor-parallel N`): every rank holds 1/N of each layer's heads and rows:
//     attention query heads with the KV heads they read (a KV head is copied when ranks outnumber
//     KV heads), GDN key heads with their value heads (conv channels and recurrent state
//     follow; a key head is copied when ranks outnumber them), MLP rows, every routed expert's
//     rows and the shared expert's; the router and the embedding are copied, the head split by
//     vocabulary rows. KV and GDN state split with their heads, so one token costs each rank its
//     share and every rank holds the same number of tokens. The same rules as the executed
//     layout (model/tensor_parallel.h's shard_config).
// Bytes are bf16 weights (2 a parameter) and the KV dtype's rows; each device's budget is its
// memory times the utilization, less a workspace reserve. Pure arithmetic on the config: no
// device is touched. Both execute: the split (EngineOptions::devices, model::MlpPlacement, with
// split_layer_devices' runs) and tensor parallelism (EngineOptions::tensor_parallel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "ops/kv_cache.h"

namespace ninfer::runtime {

enum class PlacementMode { Split, Tensor };

struct PlacementRequest {
    PlacementMode mode = PlacementMode::Split;
    int devices = 2;                  // split: device 0 plus devices - 1 MLP devices; tensor: N
    int64_t device_bytes = 0;         // memory of each device
    double utilization = 0.9;         // share of it the engine may hold
    int64_t workspace_bytes = 0;      // reserved on each device for activations and scratch
    int32_t sequences = 8;            // sequence slots, each with its GDN state
    ops::KvDtype kv_dtype = ops::KvDtype::Activation;
    int64_t gdn_state_element_bytes = 4; // the recurrent state's storage: 4 (f32) or 2 (bf16)
    int64_t mtp_layers = 0;           // MTP layers held (0: none)
    bool expert_parallel = false;     // tensor: routed experts whole, a run per rank
};

// One group of weights and where it lives: rank -1 means a copy on every rank; `share` is the
// part a rank holds ("all", "rows 0..8703 of 17408", "experts 0..127", ...).
struct TensorHome {
    std::string group;
    int rank = 0;
    std::string share;
    int64_t bytes = 0; // on each rank that holds it
};

struct DevicePlan {
    int64_t weight_bytes = 0;
    int64_t kv_bytes_per_token = 0;   // 0 on a split's MLP devices
    int64_t state_bytes_per_sequence = 0;
    int64_t budget_bytes = 0;         // device_bytes * utilization - workspace
    int64_t free_bytes = 0;           // budget - weights: what KV and state may take
};

struct PlacementPlan {
    PlacementMode mode = PlacementMode::Split;
    std::vector<DevicePlan> devices;
    std::vector<TensorHome> tensors;
    // Tokens of KV the layout holds, after the GDN state of the request's sequence slots (tensor:
    // the least over ranks, as every rank holds every token's share; split: device 0's).
    int64_t kv_tokens = 0;
    int limiting_device = 0; // the device whose memory sets kv_tokens
};

// The split's layer runs: for each of `layers` layers, the index (0-based, among the devices after
// the first) of the device its post-attention block lives on: contiguous, as even as they come.
std::vector<int> split_layer_devices(int64_t layers, int mlp_devices);

// Errors name what does not fit: a layout the config's heads or experts cannot divide, too few
// devices, a device whose weights alone exceed its budget.
PlacementPlan plan_placement(const io::ModelConfig& config, const PlacementRequest& request);

// KV tokens one device of `device_bytes` holds with the whole model (the baseline of a plan).
int64_t single_device_kv_tokens(const io::ModelConfig& config, const PlacementRequest& request);

} // namespace ninfer::runtime
