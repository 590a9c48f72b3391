// Named tolerance presets. Tests compare against the CPU reference (FP64 accumulation) or HF;
// a preset is chosen for the kind of computation and never tuned to make a test pass.
#pragma once

namespace ninfer::test {

struct Tolerance {
    const char* name;
    double rel_l2;  // ||a - b|| / ||b|| over the whole tensor
    double max_abs; // gross cap on any single element, relative to max |b| (or 1 if smaller)
};

// Exact: ids, copies, argmax, gathers.
inline constexpr Tolerance kExact{"exact", 0.0, 0.0};
// f32 elementwise and row reductions (norms, activations, rope) against FP64.
inline constexpr Tolerance kElementwiseF32{"elementwise_f32", 1e-6, 1e-5};
// f32 dot-product reductions (GEMM, attention, MoE, conv) against FP64.
inline constexpr Tolerance kReductionF32{"reduction_f32", 1e-5, 1e-4};
// f32 recurrences over many steps (gated delta rule, chunked vs recurrent).
inline constexpr Tolerance kRecurrenceF32{"recurrence_f32", 1e-5, 2e-4};
// FP64 vs FP64 along a different but exact-in-exact-arithmetic path (chunked vs recurrent).
inline constexpr Tolerance kAlgebraicF64{"algebraic_f64", 1e-11, 1e-10};

// Model-level: log-probabilities of ninfer vs HF transformers (issue 2 caps this at 1e-3).
inline constexpr double kLogprobVsHfAbs = 2e-4;
// Model-level: the same engine along two schedules (chunk sizes, prefill then decode).
inline constexpr double kLogprobScheduleAbs = 1e-4;
// Model-level, quantized KV (--kv-dtype int8 | fp8) along two schedules that compute some of the
// cache again (batched prefill chunks, a preempted request's recompute, the rows after a prefix
// hit's snapshot). The f32 schedule difference above can land one K or V element on the other
// side of a code's rounding boundary, and the flipped code moves it by a whole quantum (1/127 of
// its 64-dim group's max for int8): one flip measured 1.1e-4 nats (dense_text_yarn preempted,
// 2026-12-07), every other logprob stayed within 4e-6. Which elements flip depends on the
// BLAS kernels of the CPU at hand. A wrong code or scale moves them by far more: a 0.2% scale
// error in prefill writes failed every fixture.
inline constexpr double kLogprobScheduleRecomputedKvAbs = 1e-3;
// Model-level, bf16 on CUDA: the same engine along two schedules (batched, chunked, preempted)
// rounds each layer's activations at other points, measured on the H200 at up to 0.09 nats in
// the logprobs of the top alternatives. Two candidates closer than twice that may swap ranks: a
// near-tie fork, which a greedy comparison accepts (Comparison::near_tie).
inline constexpr double kBf16ScheduleNearTie = 0.2;
// A fixture whose HF bf16 logits deviate from its f64 ones by more than this share of the logit
// range (reference.json's hf_bf16_logits_rel) is chaotic in bf16: rounding alone moves its logits
// by several nats (a router near-tie flips an expert), so its greedy bf16 ids are no reproducible
// quantity. moe_vlm_per_expert measures 0.40 (a first token 3.0 nats behind the solo run's came
// first when batched, 2026-12-03); the other fixtures 0.06 to 0.18. Their exactness is the f32
// tests' business; in bf16 a batched id must still be one the solo run lists among its top
// alternatives.
inline constexpr double kBf16ChaoticFixtureRel = 0.25;
// Model-level logits along two schedules, max |diff| relative to max |logit|. Even the FP64
// reference path stores activations and the GDN state in f32 between ops and calls, so a
// schedule that splits a sequence differently rounds at different points (~1e-7 per layer).
inline constexpr double kScheduleLogitsRefRel = 1e-5;
inline constexpr double kScheduleLogitsF32Rel = 1e-4;

} // namespace ninfer::test
