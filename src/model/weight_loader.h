// Binds the tensors of a safetensors checkpoint to ModelWeights on a device, checking every name,
// shape and dtype. Accepts fused 3-D experts (real checkpoints) and per-expert tensors (HF
// save_pretrained); model.visual.* is recognised and skipped; mtp.* becomes the MTP group.
// A missing, unknown, misshapen or non-float tensor is an error that names it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "ops/exec_context.h"

namespace ninfer::model {

// Told how far a checkpoint load has got: bytes_done of the bytes_total that the checkpoint's
// safetensors entries hold (scales included). Called once with 0 before the first tensor (so a
// caller can start a clock), then after roughly every kLoadProgressStepBytes uploaded, and once
// with bytes_done == bytes_total when every tensor is bound; bytes_done never decreases. A throw
// from it ends the load with that exception. Random weights report nothing.
using LoadProgress = std::function<void(int64_t bytes_done, int64_t bytes_total)>;
inline constexpr int64_t kLoadProgressStepBytes = int64_t(64) << 20;

// Which quantized weights stay quantized on the device (model::Weight) instead of being
// dequantized at load to the compute dtype:
//   fp8: an fp8 checkpoint's block-wise projections (codes plus F32 scales) where every part of
//     a fused projection is fp8;
//   grouped: a groupwise (w8/q4) checkpoint's projections (attention, GDN, dense MLP, routed and
//     shared experts: codes plus the checkpoint's F16 scales, or F32 for others) where every
//     part is groupwise.
// Both need CUDA with BF16 compute, or the CPU, where each op dequantizes (a test mode: the CPU
// otherwise dequantizes at load). A bool is fp8 alone.
struct Residency {
    bool fp8 = false;
    bool grouped = false;
    Residency(bool fp8_resident = false) : fp8(fp8_resident) {} // NOLINT: a bool is fp8 alone
    Residency(bool fp8_resident, bool grouped_resident)
        : fp8(fp8_resident), grouped(grouped_resident) {}
};

// The seed's --devices split (runtime/placement.h's split plan): layer l's post-attention block
// (its norm and its MLP or MoE) lives and runs on devices[layer_device[l]] instead of the model's
// device; everything else stays there. Empty: one device.
struct MlpPlacement {
    std::vector<ops::ExecContext> devices; // the other devices' contexts (each its own stream)
    std::vector<int> layer_device;         // [num_layers]: -1 the model's device, else an index
    bool empty() const { return devices.empty(); }
    // The context of layer l's post-attention block, or null for the model's device.
    const ops::ExecContext* of(int64_t layer) const {
        if (devices.empty() || layer >= int64_t(layer_device.size())) return nullptr;
        const int d = layer_device[size_t(layer)];
        return d < 0 ? nullptr : &devices[size_t(d)];
    }
};

// Handed each decoder layer (the model's, then the MTP module's: `mtp`) as soon as it is bound;
// the loader keeps what it returns in its place. Tensor parallelism cuts every rank's share
// there and returns an empty layer, so the host holds one layer at a time, not the model.
using LayerHook = std::function<LayerWeights(LayerWeights layer, int64_t index, bool mtp)>;

// progress (may be empty): told the bytes read, at most every progress_step bytes (tests pass a
// small step to see every tensor). on_layer (may be empty): see LayerHook.
ModelWeights load_weights(const io::ModelConfig& config, const io::SafetensorsCheckpoint& ckpt,
                          const ops::ExecContext& ctx, Residency resident = {},
                          const LoadProgress& progress = {},
                          int64_t progress_step = kLoadProgressStepBytes,
                          const MlpPlacement& placement = {}, const LayerHook& on_layer = {});

// A model of the config's exact shapes with deterministic random weights made on ctx's device
// (ops::fill_random, seeded per tensor name), for speed and memory at true size without a
// checkpoint. MTP layers: config.mtp_num_hidden_layers. With an fp8 quantization_config and
// resident.fp8, the projections the official FP8 layout quantizes are random fp8; with a
// groupwise one and resident.grouped, the ones Residency keeps are random codes.
ModelWeights random_weights(const io::ModelConfig& config, const ops::ExecContext& ctx,
                            uint64_t seed, Residency resident = {},
                            const MlpPlacement& placement = {});

// Number of MTP decoder layers present in the checkpoint (mtp.layers.N.*).
int64_t count_mtp_layers(const io::SafetensorsCheckpoint& ckpt);

} // namespace ninfer::model
