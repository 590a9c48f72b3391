// Binds the tensors of a safetensors checkpoint to ModelWeights on a device, checking every name,
// shape and dtype. Accepts fused 3-D experts (real checkpoints) and per-expert tensors (HF
// save_pretrained); model.visual.* is recognised and skipped; mtp.* becomes the MTP group.
// A missing, unknown, misshapen or non-float tensor is an error that names it.
#pragma once

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "ops/exec_context.h"

namespace ninfer::model {

ModelWeights load_weights(const io::ModelConfig& config, const io::SafetensorsCheckpoint& ckpt,
                          const ops::ExecContext& ctx);

// A model of the config's exact shapes with deterministic random weights made on ctx's device
// (ops::fill_random, seeded per tensor name), for speed and memory at true size without a
// checkpoint. MTP layers: config.mtp_num_hidden_layers.
ModelWeights random_weights(const io::ModelConfig& config, const ops::ExecContext& ctx,
                            uint64_t seed);

// Number of MTP decoder layers present in the checkpoint (mtp.layers.N.*).
int64_t count_mtp_layers(const io::SafetensorsCheckpoint& ckpt);

} // namespace ninfer::model
