// The Qwen3.5/3.6/3.8 text model: configuration, device weights and the forward pass over a
// ragged batch, written only with ops:: (MODEL_QWEN3_5.md §2).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "io/hf_config.h"
#include "model/tensor_parallel.h"
#include "model/vision.h"
#include "model/weight_loader.h"
#include "model/weights.h"
#include "ops/exec_context.h"
#include "ops/kv_cache.h"
#include "ops/seq_batch.h"

namespace ninfer::model {

// Shapes of the per-sequence state the runtime must provide.
struct CacheSpec {
    int64_t attention_layers = 0; // full-attention layers: each needs a K and a V cache
    int64_t kv_heads = 0;
    int64_t head_dim = 0;
    int64_t gdn_layers = 0; // GDN layers: each needs a conv and a recurrent state
    int64_t conv_channels = 0;
    int64_t conv_history = 0; // kernel width - 1
    int64_t value_heads = 0;
    int64_t key_head_dim = 0;
    int64_t value_head_dim = 0;
    int64_t mtp_layers = 0; // MTP layers with a KV cache of their own (0: MTP not run)
    // A DFlash drafter's layers (model/dflash.h): their context K/V live in the paged pool too,
    // always in the activation dtype (never a quantized --kv-dtype), with their own head shape.
    int64_t draft_layers = 0;
    int64_t draft_kv_heads = 0;
    int64_t draft_head_dim = 0;
    // The recurrent state's storage (ops/gated_delta_rule.h): F32 (exact across any batching
    // and chunking) or BF16 (half the bytes a step reads and writes per sequence; each store
    // rounds). The conv state is always in the activation dtype.
    DType recurrent_dtype = DType::F32;
};

// Per-layer cache tensors, indexed by the layer's rank among layers of its kind.
struct CacheViews {
    std::vector<ops::KvPlane> k_cache, v_cache; // [NB, bs, nKV, D] (ops/kv_cache.h)
    std::vector<TensorView> conv_state;         // [slots, C, K-1]
    std::vector<TensorView> recurrent_state;    // [slots, Hv, dk, dv] CacheSpec::recurrent_dtype
    std::vector<ops::KvPlane> mtp_k_cache, mtp_v_cache; // the MTP layers' KV, same layout
    std::vector<TensorView> draft_k_cache, draft_v_cache; // a DFlash drafter's [NB, bs, nKV, D]
    // Tensor parallelism: the caches of ranks 1..N-1 (each on its rank's device, of the same
    // shard shapes and block and slot ids as these, rank 0's).
    std::vector<CacheViews> peer_ranks;
};

// One forward call. All views are on the execution device.
struct ForwardBatch {
    TensorView tokens;    // [T] I32
    TensorView positions; // [T] I32
    ops::SeqBatch seqs;
    TensorView logit_rows; // [R] I32: rows whose logits are wanted, in output order
    TensorView hidden_out; // [T, H] or undefined: every row's final-normed hidden state

    // Multimodal prompts (empty for text-only batches). After the token embedding, rows
    // [row, row + embeds.size(0)) take embeds: the vision tower's output for those placeholder
    // tokens ([n, H] on the device, the activation dtype).
    struct MediaRows {
        int64_t row = 0;
        TensorView embeds;
    };
    std::vector<MediaRows> media;
    // mRoPE (MODEL_QWEN3_5.md §4): when set, the (temporal, height, width) rotary positions of
    // every row, host memory [3, T]; the full-attention layers then rotate with the interleaved
    // 3-axis angles. Unset: every axis is `positions` (text-only rows; plain 1-D RoPE).
    const int32_t* host_mrope_positions = nullptr;
    // DFlash feature taps (model/dflash.h): when features is defined, the residual stream after
    // each layer of feature_layers (in that order) is copied to features [T, n * H], layer i's
    // into columns [i * H, (i + 1) * H) (HF's hidden_states[layer + 1]).
    TensorView features;
    std::vector<int32_t> feature_layers;
};

// How load_parallel and random_parallel split and keep the model.
struct ParallelOptions {
    bool expert_parallel = false; // routed experts whole, a run per rank (tensor_parallel.h)
};

class Qwen35Model {
public:
    Qwen35Model(io::ModelConfig config, ModelWeights weights, Device device,
                MlpPlacement placement = {});
    ~Qwen35Model();

    // Reads config.json and the safetensors of a checkpoint directory onto a device.
    // resident and progress (bytes read of the checkpoint's): see load_weights
    // (weight_loader.h).
    // placement: the post-attention blocks that live and run on other devices (MlpPlacement);
    // the forward copies the residual there and back around each of them.
    static std::unique_ptr<Qwen35Model> load(const std::filesystem::path& dir,
                                             const ops::ExecContext& ctx, Residency resident = {},
                                             const LoadProgress& progress = {},
                                             const MlpPlacement& placement = {});
    // A model of config's shapes with deterministic random weights (weight_loader.h).
    static std::unique_ptr<Qwen35Model> random(const io::ModelConfig& config,
                                               const ops::ExecContext& ctx, uint64_t seed,
                                               Residency resident = {},
                                               const MlpPlacement& placement = {});

    // Tensor parallelism (model/tensor_parallel.h) over ranks.size() contexts, one rank each, with
    // collectives[r] for rank r: rank 0's model, which runs the other ranks' in its forward.
    // The checkpoint is bound on the host a layer at a time, each layer cut for every rank as soon
    // as it is bound (weight_loader.h's LayerHook); resident quantized weights stay
    // quantized where a rank's rows or columns line up with their scales (model/weight_cut.h),
    // and are dequantized exactly where they do not.
    static std::unique_ptr<Qwen35Model> load_parallel(
        const std::filesystem::path& dir, const std::vector<ops::ExecContext>& ranks,
        const std::vector<std::shared_ptr<ops::Collective>>& collectives,
        Residency resident = {}, const LoadProgress& progress = {}, ParallelOptions opts = {});
    // Random weights made on each rank at its shard's shapes (the same seed: the copied tensors
    // agree across ranks), the head cut by vocabulary rows.
    static std::unique_ptr<Qwen35Model> random_parallel(
        const io::ModelConfig& config, const std::vector<ops::ExecContext>& ranks,
        const std::vector<std::shared_ptr<ops::Collective>>& collectives, uint64_t seed,
        Residency resident = {}, ParallelOptions opts = {});

    // This rank's shapes under tensor parallelism (heads, intermediate sizes, held experts:
    // shard_config).
    const io::ModelConfig& config() const { return config_; }
    // Ranks this model runs over (1: one device).
    int tensor_parallel() const { return shard_.ranks; }
    // A drafter's proposal through the head, with no final norm: logits [n, V] F32 (on this
    // device) = rows [n, H] . lm_head^T. Under tensor parallelism each rank projects onto its
    // vocabulary rows and rank 0 gathers the columns, as for the model's own logits, so no rank
    // holds the whole head.
    void project_to_vocab(const ops::ExecContext& ctx, const TensorView& rows,
                          const TensorView& logits);
    // Rows `ids` of the whole head [len(ids), H] on this device, in list order (a proposal
    // shortlist), gathered from the ranks that hold them under tensor parallelism.
    Tensor head_rows(const ops::ExecContext& ctx, const std::vector<int32_t>& ids) const;
    // The head rows [0, n) as a view of this device's head, when it holds them all (one device,
    // or rank 0 with n <= its vocabulary run); an empty view otherwise.
    TensorView head_prefix(int64_t n) const;
    const ModelWeights& weights() const { return weights_; }
    // with_mtp: the KV of the MTP layers too (speculative decoding with the MTP head).
    CacheSpec cache_spec(bool with_mtp = false) const;
    bool has_mtp() const { return !weights_.mtp.layers.empty(); }
    // Whether the checkpoint carries a vision tower (model.visual.*): media can be encoded.
    bool has_vision() const { return weights_.vision.loaded(); }
    // The vision tower (vision.h): media pixels -> the embeddings of their placeholder tokens.
    VisionEncoder& vision();
    // Device bytes of the weights (this rank's under tensor parallelism), and of the activation scratch of the largest step so far.
    int64_t weight_bytes() const { return weight_bytes_; }
    int64_t scratch_bytes() const;
    // Bumped whenever the activation scratch is reallocated: graphs captured before hold stale
    // buffer addresses and must be captured again.
    int64_t scratch_generation() const;
    // Whether a forward over `rows` rows runs without host synchronisation (capturable).
    bool capturable(const ops::ExecContext& ctx, int64_t rows) const;
    // The longest context a batch of this engine reaches (positions below it): sizes a scaled
    // RoPE's position tables (default: the config's position_limit). Every rank's.
    void set_context_limit(int64_t positions);

    // Runs every layer over the batch, updating the caches, and writes the logits of the
    // selected rows: logits [R, V] F32 on the device.
    void forward(const ops::ExecContext& ctx, const ForwardBatch& batch, const CacheViews& caches,
                 const TensorView& logits);

    // The MTP module (MODEL_QWEN3_5.md §3) over a ragged batch: row t takes the token
    // batch.tokens[t] (the token after the hidden state's position) and hidden[t] (the target's
    // final-normed hidden state, or the previous MTP output when chaining), runs at
    // batch.positions[t] and appends to the MTP layer's KV (caches.mtp_*). Writes every row's
    // draft hidden state (after mtp.norm) to draft_hidden [T, H] and the logits of the rows
    // batch.logit_rows select (over draft_hidden) to logits [R, V] F32.
    void mtp_forward(const ops::ExecContext& ctx, const ForwardBatch& batch,
                     const TensorView& hidden, const CacheViews& caches,
                     const TensorView& draft_hidden, const TensorView& logits);

private:
    struct Scratch;
    struct Peers; // ranks 1..N-1 of tensor parallelism (qwen3_5_parallel.cpp)
    static std::unique_ptr<Qwen35Model> make_parallel(
        const io::ModelConfig& full, const std::vector<ops::ExecContext>& ranks,
        const std::vector<std::shared_ptr<ops::Collective>>& collectives, bool expert_parallel,
        const std::function<ModelWeights(int rank, const io::ModelConfig& shard)>& weights_of);
    void forward_rank(const ops::ExecContext& ctx, const ForwardBatch& batch,
                      const CacheViews& caches, const TensorView& logits);
    void mtp_forward_rank(const ops::ExecContext& ctx, const ForwardBatch& batch,
                          const TensorView& hidden, const CacheViews& caches,
                          const TensorView& draft_hidden, const TensorView& logits);
    // Under tensor parallelism a projection into the residual adds on rank 0 only (the others
    // write their part alone) and reduce_residual sums the ranks' x.
    bool adds_residual() const { return shard_.rank == 0; }
    void reduce_residual(const ops::ExecContext& ctx, const TensorView& x);
    // The head over the selected rows (final-normed first when `norm`): logits [R, V], or this
    // rank's vocabulary columns gathered into rank 0's logits.
    void head(const ops::ExecContext& ctx, const TensorView& selected, const TensorView& logits,
              bool norm = true);
    // This rank's part of project_to_vocab: head() without the final norm, its scratch sized.
    void project_rank(const ops::ExecContext& ctx, const TensorView& rows,
                      const TensorView& logits);
    // A forward's mRoPE angle tables [T, rotary_dim / 2] on the device (empty views: plain RoPE
    // from batch.positions).
    struct RopeTables {
        TensorView cos, sin;
    };
    // The batch's tables: mRoPE's when it carries host_mrope_positions, a scaled RoPE's rows of
    // its position tables (gathered on the device by batch.positions), else empty.
    RopeTables rope_tables(const ops::ExecContext& ctx, const ForwardBatch& batch);
    RopeTables mrope_tables(const ops::ExecContext& ctx, const ForwardBatch& batch);
    void gdn_layer(const ops::ExecContext& ctx, const LayerWeights& w, const ForwardBatch& batch,
                   const TensorView& conv_state, const TensorView& recurrent_state);
    void attention_layer(const ops::ExecContext& ctx, const LayerWeights& w,
                         const ForwardBatch& batch, const ops::KvPlane& k_cache,
                         const ops::KvPlane& v_cache, const RopeTables& rope);
    void mlp_block(const ops::ExecContext& ctx, Scratch& s, const LayerWeights& w, int64_t T);
    // mlp_block on the layer's placed device: the residual rows there, the block, and back.
    void placed_mlp_block(const ops::ExecContext& ctx, const ops::ExecContext& on, Scratch& s,
                          const LayerWeights& w, int64_t T);
    Scratch& placed_scratch(int64_t layer); // the scratch of layer's placed device

    io::ModelConfig config_;
    ModelWeights weights_;
    Device device_;
    int64_t weight_bytes_ = 0;
    std::unique_ptr<Scratch> scratch_;
    MlpPlacement placement_;
    std::vector<std::unique_ptr<Scratch>> placed_scratch_; // one per placement_.devices
    std::unique_ptr<VisionEncoder> vision_;
    TensorShard shard_;
    std::shared_ptr<Peers> peers_; // rank 0 of tensor parallelism only (shared: Peers is opaque here)
    // A scaled RoPE's cos and sin [context_limit_ + kRopeTableSlack, rotary_dim / 2] F32 of
    // every position (rope_angles.h), built on the first forward (the engine's profile forward,
    // before any graph capture).
    Tensor rope_position_cos_, rope_position_sin_;
    int64_t context_limit_ = 0; // set_context_limit; 0: the config's position_limit
};

} // namespace ninfer::model
