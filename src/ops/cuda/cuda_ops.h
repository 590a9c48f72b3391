// CUDA bodies of the op families (host functions; no CUDA headers here). Arguments are validated
// by the dispatchers in ops/<family>.cpp first. Builds without CUDA link cuda_stub.cpp instead,
// whose functions raise Unsupported.
#pragma once

#include <functional>
#include <memory>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/gated_delta_rule.h"
#include "ops/kv_cache.h"
#include "ops/memory.h"
#include "ops/sampling.h"
#include "ops/seq_batch.h"
#include "ops/weight.h"

namespace ninfer::ops::cuda {

// Memory.
Allocator& allocator(Device device);
void upload(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
void download(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
void fill_zero(const ExecContext& ctx, const TensorView& dst);
void copy(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
void copy_across(const ExecContext& from, const TensorView& src, const ExecContext& to,
                 const TensorView& dst);
void stream_wait(const ExecContext& waiter, const ExecContext& producer);
void enable_peer_access(int a, int b);
void copy_many(const ExecContext& ctx, const std::vector<TensorView>& src,
               const std::vector<TensorView>& dst);
void synchronize(const ExecContext& ctx);
bool capturing(const ExecContext& ctx);
DeviceMemory device_memory(const ExecContext& ctx);
void reset_memory_peak(const ExecContext& ctx);
int64_t memory_peak(const ExecContext& ctx);
int64_t memory_in_use(const ExecContext& ctx);
void bind_device(const ExecContext& ctx);
std::shared_ptr<void> create_stream(Device device);
std::unique_ptr<Graph> capture_graph(const ExecContext& ctx, const std::function<void()>& body);
void fill_random(const ExecContext& ctx, const TensorView& dst, uint64_t seed, float mean,
                 float stddev);

// Ops.
void embedding_bag_add(const ExecContext& ctx, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out);
void embedding(const ExecContext& ctx, const TensorView& ids, const TensorView& table,
               const TensorView& out);
void rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset);
void gated_rms_norm(const ExecContext& ctx, const TensorView& x, const TensorView& z,
                    const TensorView& w, float eps, const TensorView& y);
void linear(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate);
// rms_norm_linear in one kernel when the shapes allow (few rows, BF16 x, aligned rows; a BF16 or
// fp8 weight where linear takes its GEMV); false otherwise (nothing launched; the caller runs the
// two ops). With w2 and y2 (rms_norm_linear_pair), also y2 = h . w2^T in the same launch, for an
// fp8 w and a BF16 w2 only.
bool rms_norm_linear_fused(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                           float eps, const WeightView& w, const TensorView& y,
                           const TensorView& h, const WeightView* w2 = nullptr,
                           const TensorView* y2 = nullptr);
void add(const ExecContext& ctx, const TensorView& a, const TensorView& b, const TensorView& out);
void sigmoid_mul(const ExecContext& ctx, const TensorView& x, const TensorView& gate,
                 const TensorView& out);
void silu_mul(const ExecContext& ctx, const TensorView& gate_up, const TensorView& out);
void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y);
void gdn_gates(const ExecContext& ctx, const TensorView& a, const TensorView& b,
               const TensorView& A_log, const TensorView& dt_bias, const TensorView& g,
               const TensorView& beta);
void gated_delta_rule(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& g, const TensorView& beta,
                      const SeqBatch& batch, const TensorView& state, const TensorView& out,
                      GdnAlgo algo);
// gdn_core's fused decode route (gdn_core.cu) and the batches and shapes it takes; the
// dispatcher runs the op composition for the rest.
bool gdn_core_fused_fits(const SeqBatch& batch, const TensorView& conv_w,
                         const TensorView& recurrent_state, int64_t Hk);
void gdn_core_fused(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
                    const TensorView& b, const TensorView& a, const TensorView& conv_w,
                    const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
                    float eps, const SeqBatch& batch, const TensorView& conv_state,
                    const TensorView& recurrent_state, const TensorView& core);
// The fused decode kernel's build (gdn_core.cu): the column blocks (gdn_core_columns.cu;
// NINFER_GDN_CORE_COLUMNS=1) or the row-group blocks built to hold 1 or 2 an SM
// (NINFER_GDN_CORE_BLOCKS=2), and whether either reads the recurrent state before its PDL wait
// (NINFER_GDN_CORE_EARLY_STATE=1).
struct GdnCoreVariant {
    int blocks_per_sm = 1;
    bool early_state = false;
    bool columns = false;
};
GdnCoreVariant gdn_core_variant();
void rope(const ExecContext& ctx, const TensorView& x, const TensorView& positions,
          int64_t rotary_dim, double theta);
void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const KvPlane& k_cache, const KvPlane& v_cache);
void paged_attention(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out);
// attention_prep's fused route (attention_prep.cu) and the shapes it takes (any batch); the
// dispatcher runs the op composition for the rest.
bool attention_prep_fused_fits(const TensorView& q_in, const TensorView& k_in,
                               const TensorView& v_in, const TensorView& q_norm,
                               const TensorView& k_norm, int64_t rotary_dim, const TensorView& q,
                               const KvPlane& k_cache, const KvPlane& v_cache);
void attention_prep_fused(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                          const TensorView& v_in, const TensorView& q_norm,
                          const TensorView& k_norm, float eps, const TensorView& positions,
                          int64_t rotary_dim, double theta, const SeqBatch& batch,
                          const TensorView& q, const KvPlane& k_cache,
                          const KvPlane& v_cache);
void moe_route(const ExecContext& ctx, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, int64_t first, int64_t held);
void moe_experts(const ExecContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y);
bool moe_experts_capturable(int64_t pairs, int64_t H, int64_t I);
// used[e] = 1 when some pair of ids [T, k] (I32; -1 skipped) is routed to expert e, else 0;
// used: I32 [E].
void mark_used_experts(const ExecContext& ctx, const TensorView& ids, const TensorView& used);
// moe_experts over block-wise fp8 stacks on the grouped tensor-core route (the codes are read
// once per M-tile and turned into bf16 in shared memory: the values dequantize_fp8 writes).
bool moe_experts_fp8_fits(const TensorView& x, const WeightView& gate_up, const WeightView& down);
void moe_experts_fp8(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                     const WeightView& down, const TensorView& ids, const TensorView& weights,
                     const TensorView& y);
void add_sigmoid_scaled(const ExecContext& ctx, const TensorView& gate_logit,
                        const TensorView& shared, const TensorView& y);
// moe_block's fused decode route (moe_decode.cu) and the shapes it takes; the dispatcher runs
// the op composition for the rest.
bool moe_block_decode_fits(const TensorView& h, const TensorView& router_logits, int64_t top_k,
                           const WeightView& experts_gate_up, const WeightView& experts_down,
                           const WeightView& shared_gate_up, const WeightView& shared_down);
void moe_block_decode(const ExecContext& ctx, const TensorView& h, const TensorView& router_logits,
                      int64_t top_k, const WeightView& experts_gate_up,
                      const WeightView& experts_down, const WeightView& shared_gate_up,
                      const WeightView& shared_down, const TensorView& y, int64_t first_expert);
void logprobs_top_k(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs);
void apply_penalties(const ExecContext& ctx, const TensorView& logits,
                     const SamplingParamsRow* params, const TensorView& offsets,
                     const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt);
void sample_tokens(const ExecContext& ctx, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source,
                   const TensorView& chosen_logits, const SampleDrafts& drafts);

} // namespace ninfer::ops::cuda
