// DFlash and DFlash2 drafters (block-diffusion speculative decoding, z-lab's published layout).
//
// A drafter is a small non-causal transformer (Qwen3 blocks: plain RMSNorm, q/k head norms,
// RoPE, GQA, SwiGLU) conditioned on the target by KV injection:
//   context: features [T, n_taps * H] (the target's residual stream after each tap layer,
//     ForwardBatch::features) -> c = norm_plain(hidden_norm, fc(features)); every layer l
//     appends k = rope(k_norm(W_k c)), v = W_v c at each row's absolute position to its paged
//     KV (CacheViews::draft_*). Context never passes through the drafter's residual stack.
//   proposal: the block [anchor, MASK x K] at positions F .. F + K, embedded with the target's
//     embedding, runs every layer; its own K/V are written at F .. F + K (beyond the committed
//     frontier: scratch that the next context write replaces), and each row attends over the
//     keys the layer's mask allows (span_for): sliding layers a symmetric window
//     |p - tau| < sliding_window, non-causal layers the whole block. The final norm's rows of
//     the mask columns are the draft hidden states; the target's lm_head gives their logits
//     (times output_multiplier, soft-capped when final_logit_softcapping > 0).
// DFlash2 adds per layer the grouped dynamic causal convolutions around attention and MLP
// (ops/dflash.h grouped_dynamic_conv; "prepare" before, "finish" after, sharing one kernel
// projection) and the top-k conditional candidate selector (ops/dflash.h dflash_select).
//
// config.json: Qwen3 fields (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps, rope_theta or
// rope_parameters.rope_theta, vocab_size, layer_types, sliding_window, is_causal; optional
// num_target_layers and block_size) and dflash_config {mask_token_id (or mask_token, its text
// in the target's tokenizer; "<|MASK|>" when neither is given), optional
// target_layer_ids (else z-lab's spread over the target's depth: default_target_layers) and
// block_size (else the top level's, else 16), and for DFlash2 conv_kernel_size,
// conv_group_size, selector_rank, selector_top_k; optional output_multiplier,
// final_logit_softcapping, input_embedding_scale}. DFlash2 is recognised by its architecture
// (DFlash2DraftModel) or by selector_rank.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "model/qwen3_5.h"
#include "model/weights.h"
#include "ops/exec_context.h"
#include "ops/span_attention.h"

namespace ninfer::model {

struct DFlashConfig {
    bool v2 = false; // DFlash2
    int64_t hidden_size = 0, intermediate_size = 0, num_layers = 0;
    int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
    double rms_norm_eps = 1e-6, rope_theta = 1e6;
    std::vector<bool> sliding; // per layer: sliding_attention (else full_attention)
    std::vector<bool> causal;  // per layer
    int64_t sliding_window = 0;
    std::vector<int32_t> target_layers; // empty until resolve_dflash_target when not given
    int64_t num_target_layers = 0;      // the target depth it was trained on (0: not given)
    int32_t mask_token_id = 0;              // -1: by mask_token's text (resolve_dflash_target)
    std::string mask_token = "<|MASK|>";    // SGLang's default text
    int64_t block_size = 16;
    double output_multiplier = 1.0, logit_softcap = 0.0;
    // DFlash2.
    int64_t conv_taps = 0, conv_group = 0, selector_rank = 0, selector_top_k = 0;

    int64_t conv_groups() const { return hidden_size / conv_group; }
};

// Errors name the file and the field; contradictions and unsupported options are errors.
DFlashConfig parse_dflash_config(const nlohmann::json& j, const std::string& source);
// Reads and parses a drafter's config.json.
DFlashConfig load_dflash_config(const std::filesystem::path& path);
// z-lab's build_target_layer_ids: one tap per drafter layer, evenly from layer 1 to L - 3
// (rounded as Python rounds, halves to even); L / 2 for a one-layer drafter.
std::vector<int32_t> default_target_layers(int64_t target_layers, int64_t draft_layers);
// The id of a token's text in the target's tokenizer (nullopt: no such token).
using TokenLookup = std::function<std::optional<int32_t>(const std::string&)>;
// Fills what the config left to the target (the taps, from its depth; the mask id, from its
// text through find_token: none makes such a config an error) and checks that the drafter fits
// it: num_target_layers, hidden size, vocabulary, tap layers, mask id.
void resolve_dflash_target(DFlashConfig& d, const io::ModelConfig& target,
                           const std::string& source, const TokenLookup& find_token = {});

struct DFlashLayerWeights {
    Tensor input_norm, post_norm, q_norm, k_norm; // plain RMSNorm weights
    Weight qkv;    // [(nH + 2 nKV) D, H]: q | k | v rows
    Weight o_proj; // [H, nH D]
    Weight gate_up; // [2 I, H]
    Weight down;    // [H, I]
    // DFlash2: [2 (prepare, finish), taps, H] base kernels and the kernel projections
    // [2 taps G, H] (rows: side, tap, group).
    Tensor attn_conv_base, mlp_conv_base;
    Weight attn_conv_proj, mlp_conv_proj;
};

struct DFlashWeights {
    Weight fc;          // [H, n_taps H]
    Tensor hidden_norm; // [H]
    Tensor norm;        // [H]
    std::vector<DFlashLayerWeights> layers;
    // DFlash2's selector.
    Weight selector_proj;        // [R, H]
    Tensor predecessor, successor; // [V, R]
};

// One proposal over B sequences' blocks of W = K + 1 rows each (rows b W .. b W + K).
struct DFlashBlocks {
    TensorView tokens;    // [B W] I32: anchor, then mask ids
    TensorView positions; // [B W] I32
    ops::SeqBatch seqs;   // the block rows as B sequences (their KV writes)
    const int32_t* host_segments = nullptr; // [B + 1]: b W
    TensorView segments;
};

class DFlashModel {
public:
    // Loads config.json and the safetensors of a drafter directory for `target`; find_token
    // resolves a mask token given by text (resolve_dflash_target).
    static std::unique_ptr<DFlashModel> load(const std::filesystem::path& dir,
                                             const io::ModelConfig& target,
                                             const ops::ExecContext& ctx,
                                             const TokenLookup& find_token = {});
    // A drafter of config's shapes with seeded random weights (tests and benchmarks).
    static std::unique_ptr<DFlashModel> random(DFlashConfig config,
                                               const io::ModelConfig& target,
                                               const ops::ExecContext& ctx, uint64_t seed,
                                               const TokenLookup& find_token = {});

    ~DFlashModel();
    const DFlashConfig& config() const { return config_; }
    int64_t weight_bytes() const;
    // The key span [begin, end) of a row at position p of a block that ends at position last,
    // in layer l.
    std::pair<int32_t, int32_t> span_for(int64_t layer, int64_t p, int64_t last) const;
    // Whether every layer has the same mask kind (one SpanBatch serves them all).
    bool uniform_layers() const;

    // Appends the context of `features` rows (their positions and sequences: seqs) to every
    // layer's KV.
    void write_context(const ops::ExecContext& ctx, const TensorView& features,
                       const TensorView& positions, const ops::SeqBatch& seqs,
                       const CacheViews& caches);
    // Runs the blocks; out: [B W, H] final-normed hidden rows. layer_spans[l]: every row's keys
    // in layer l (span_for; layers of one kind may share one SpanBatch).
    void propose(const ops::ExecContext& ctx, const DFlashBlocks& blocks,
                 const std::vector<const ops::SpanBatch*>& layer_spans, const CacheViews& caches,
                 const ModelWeights& target, const TensorView& out);
    // Changes whenever the scratch moves (it grows with the rows of a call): captured graphs of
    // propose are then stale.
    int64_t scratch_generation() const;

    const DFlashWeights& weights() const { return weights_; }

private:
    DFlashModel(DFlashConfig config, DFlashWeights weights);
    struct Scratch;
    void layer(const ops::ExecContext& ctx, const DFlashLayerWeights& w, const DFlashBlocks& b,
               const ops::SpanBatch& spans, const TensorView& k_cache, const TensorView& v_cache,
               int64_t T);

    DFlashConfig config_;
    DFlashWeights weights_;
    std::unique_ptr<Scratch> scratch_;
};

} // namespace ninfer::model
