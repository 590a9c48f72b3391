// CPU bodies of the op families. Each takes the CpuMode: Reference runs the naive loop of the
// contract with FP64 accumulation (the oracle); Fast runs f32 with BLAS and OpenMP threads.
// Arguments are validated by the dispatchers in ops/<family>.cpp before they get here.
#pragma once

#include "ops/exec_context.h"
#include "ops/gated_delta_rule.h"
#include "ops/kv_cache.h"
#include "ops/sampling.h"
#include "ops/seq_batch.h"

namespace ninfer::ops::cpu {

void embedding(CpuMode mode, const TensorView& ids, const TensorView& table, const TensorView& out);
void embedding_bag_add(CpuMode mode, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out);
void rms_norm(CpuMode mode, const TensorView& x, const TensorView& w, float eps,
              const TensorView& y, float weight_offset);
void gated_rms_norm(CpuMode mode, const TensorView& x, const TensorView& z, const TensorView& w,
                    float eps, const TensorView& y);
void linear(CpuMode mode, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate);
// In place, rows x cols floats row_stride apart: each row's blocks of `block` columns (the last
// may be short) as CUDA's W8A8 routes quantize them, s = max(amax, 1e-12) / 448, v = e4m3_rn(v /
// s) * s (ExecContext::cpu_w8a8).
void quantize_rows_e4m3(float* x, int64_t rows, int64_t cols, int64_t row_stride, int64_t block);
void add(CpuMode mode, const TensorView& a, const TensorView& b, const TensorView& out);
void sigmoid_mul(CpuMode mode, const TensorView& x, const TensorView& gate, const TensorView& out);
void silu_mul(CpuMode mode, const TensorView& gate_up, const TensorView& out);
void causal_conv1d_silu(CpuMode mode, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y);
void gdn_gates(CpuMode mode, const TensorView& a, const TensorView& b, const TensorView& A_log,
               const TensorView& dt_bias, const TensorView& g, const TensorView& beta);
void gated_delta_rule(CpuMode mode, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& g, const TensorView& beta, const SeqBatch& batch,
                      const TensorView& state, const TensorView& out, GdnAlgo algo);
void rope(CpuMode mode, const TensorView& x, const TensorView& positions, int64_t rotary_dim,
          double theta);
void kv_cache_write(CpuMode mode, const TensorView& k, const TensorView& v, const SeqBatch& batch,
                    const KvPlane& k_cache, const KvPlane& v_cache);
void paged_attention(CpuMode mode, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out);
void moe_route(CpuMode mode, const TensorView& router_logits, int64_t top_k,
               const TensorView& weights, const TensorView& ids, int64_t first, int64_t held);
// w8a8_in / w8a8_act > 0 (ExecContext::cpu_w8a8 with fp8 stacks): x's rows, then the SwiGLU
// rows (f32, never rounded to the compute dtype), quantized by quantize_rows_e4m3 in blocks of
// that many columns before their products, as CUDA's W8A8 MoE route (moe_w8a8.h) does.
void moe_experts(CpuMode mode, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& y, int64_t w8a8_in = 0, int64_t w8a8_act = 0);
void add_sigmoid_scaled(CpuMode mode, const TensorView& gate_logit, const TensorView& shared,
                        const TensorView& y);
void logprobs_top_k(CpuMode mode, const TensorView& logits, int64_t vocab_limit,
                    const TensorView& lse, const TensorView& ids, const TensorView& logprobs);
void apply_penalties(CpuMode mode, const TensorView& logits, const SamplingParamsRow* params,
                     const TensorView& offsets, const TensorView& tokens, const TensorView& counts,
                     const TensorView& in_prompt);
void sample_tokens(CpuMode mode, const TensorView& logits, int64_t vocab_limit,
                   const SamplingParamsRow* params, const TensorView& tokens,
                   const TensorView& status, const TensorView& chosen_source,
                   const TensorView& chosen_logits, const SampleDrafts& drafts);

} // namespace ninfer::ops::cpu
