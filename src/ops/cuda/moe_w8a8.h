// The W8A8 route of moe_experts' grouped path for block-wise fp8 expert stacks (moe_w8a8.cu):
// the activations quantized per (row, 128 columns) to e4m3 like linear_fp8_w8a8.cu's
// quantize_rows_fp8 (s = max(amax, 1e-12) / 448, code = e4m3_rn(x / s), saturating), then the
// two grouped GEMMs on CUTLASS's block-scaled fp8 wgmma (moe_grouped_sm90_fp8.h):
//   codes, sa = quantize(x)                              once per token (quantize_rows_fp8)
//   codes, sa = gathered to slot s from token_of_slot[s]  per slot s, in expert order
//   gu        = bf16(codes . gate_up^T)                  [pairs, 2I], f32 accumulation
//   act       = silu(gu[:, :I]) * gu[:, I:]              f32, never rounded to bf16
//   codes, sa = quantize(act)
//   out       = bf16(codes . down^T)                     [pairs, H], f32 accumulation
// moe.cu's combine then adds the weighted rows into y (f32 sum, one rounding). The GEMM outputs
// are rounded to bf16 as the bf16 checkpoints' own expert linears round them; that halves the
// bytes the SwiGLU and combine passes read. Numerics differ from the weight-only fp8
// route (bf16 activations) by the activation quantization: 3 mantissa bits per element, a scale
// per 128 columns, as vLLM runs the official FP8 checkpoints.
// Included by .cu files only.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops::cuda {

// Whether the W8A8 route takes these fp8 stacks for `pairs` pairs: route table decision
// moe_experts.fp8 gives it the pairs, both stacks are packed [E, N, K] fp8 with 128 x 128 blocks
// and F32 scales, and the kernel fits ctx's device (sm_90, N and K multiples of 128).
bool w8a8_route(const ExecContext& ctx, const WeightView& gate_up, const WeightView& down,
                int64_t pairs);

// out[s] = the expert rows of slot s (see above) for the slots s < end[E - 1]; count/end: the
// experts' pair counts and slot ends, token_of_slot: moe.cu's slot -> token map. x: [T, H] bf16,
// rows contiguous; out: [pairs, H] bf16.
void experts_w8a8(const ExecContext& ctx, const TensorView& x, const WeightView& gate_up,
                  const WeightView& down, const int32_t* count, const int32_t* end,
                  const int32_t* token_of_slot, int64_t pairs, const TensorView& out);

// Test hook (a sabotage arm): when set, the weight scales reach the GEMM in the checkpoint's
// layout instead of the transposed one, so the route's output must fail its comparison.
void set_w8a8_scale_sabotage(bool untransposed);

} // namespace ninfer::ops::cuda
