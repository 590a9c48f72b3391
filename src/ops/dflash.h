// The DFlash2 drafter's two small ops (model/dflash.h; SPECULATIVE.md of docs/).
//
// grouped_dynamic_conv: one side ("prepare" or "finish") of DFlash2's GroupedDynamicCausalConv
//   over draft blocks. Segment s (one sequence's block) owns rows [seg[s], seg[s + 1]). For row t
//   at block offset i = t - seg[s], channel c and its group g = c / group_size:
//     out[t, c] = sum_{o < taps, o <= i} (base[o, c] + dynamic[t, o * G + g]) * x[t - o, c]
//   (the earlier taps are zero before the block's first row: no history across blocks).
//   x: [T, H] float, rows contiguous   out: [T, H] contiguous, x's dtype, must not alias x
//   dynamic: [T, taps * G] float, G = H / group_size, last dim contiguous, row stride free (a
//     column range of the kernel projection's output)
//   base: [taps, H] float, contiguous
//   host_segments: [S + 1] non-decreasing, [0] = 0, [S] = T (host); segments: the same values as
//     an I32 device view
//   All float tensors share one dtype.
//   Numerics: the sum in f32 (f64 in CPU reference mode), rounded once to out's dtype.
//
// dflash_select: DFlash2's conditional top-k walk over a proposal's K mask columns. For each
//   sequence b, positions i = 0 .. K-1 in order, with pred_0 = anchor[b]:
//     e[c] = unary[b, i, c] + sum_r P[pred_i, r] * g[b, i, r] * S[cand[b, i, c], r]   (c < k)
//     greedy (temperature <= 0): j = the lowest c with the largest e[c]; q[b, i, :] one-hot at j
//     sampling: q[b, i, c] = softmax_c(e / temperature) (f32); j = the first c whose inclusive
//       prefix sum of q exceeds u[b, i] (k - 1 when none does)
//     path[b, i] = cand[b, i, j];  pred_{i + 1} = path[b, i]
//   unary: [B, K, k] F32   cand: [B, K, k] I32 (ids < V)   g: [B, K, R] float, contiguous
//   P, S: [V, R] float (the predecessor and successor codebooks), contiguous, g's dtype
//   anchor: [B] I32   u: [B, K] F32 (read only when temperature > 0)
//   path: [B, K] I32   q: [B, K, k] F32
//   Numerics: e and the softmax in f32 (f64 in CPU reference mode); k <= 64.
//   Ids outside [0, V) (anchor, cand): the CPU raises InvalidArgument; CUDA, which cannot raise
//   from the device, leaves path = -1 and q = 0 at that position and every later one of the
//   sequence. u may be an empty view when temperature <= 0 (a NaN temperature is greedy too).
// Workspace: none.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

void grouped_dynamic_conv(const ExecContext& ctx, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size,
                          const int32_t* host_segments, const TensorView& segments,
                          const TensorView& out);

void dflash_select(const ExecContext& ctx, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q);

} // namespace ninfer::ops
