// Parameter counts and memory needs of a configuration, without loading weights (ninfer info).
#pragma once

#include <cstdint>

#include "io/hf_config.h"

namespace ninfer::model {

struct ParamCounts {
    int64_t embedding = 0;
    int64_t lm_head = 0;          // 0 when tied to the embedding
    int64_t gdn_layers = 0;       // all GDN token mixers
    int64_t attention_layers = 0; // all full-attention token mixers
    int64_t mlp = 0;              // all MLP / MoE blocks (routed experts included)
    int64_t norms = 0;            // layer norms and the final norm
    int64_t text_total = 0;       // everything above
    int64_t active_per_token = 0; // text params read per token (MoE: top-k experts + shared)
    int64_t mtp = 0;              // the MTP head, for mtp_layers layers
};

ParamCounts count_params(const io::ModelConfig& config, int64_t mtp_layers);

// Bytes of per-sequence state: KV per token (all full-attention layers, K and V) at the given
// element size, and the fixed GDN state (conv history + fp32 recurrent state, all GDN layers).
int64_t kv_bytes_per_token(const io::ModelConfig& config, int64_t element_bytes);
int64_t gdn_state_bytes_per_sequence(const io::ModelConfig& config, int64_t conv_element_bytes);

} // namespace ninfer::model
