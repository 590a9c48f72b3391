// The grouped (prefill) route of moe_experts on CUDA, shared by moe.cu (device-side routing, the
// CUDA-core fallback, the combine) and moe_grouped.cu (the bf16 tensor-core GEMMs).
// Pairs p = t * k + j are placed in expert order: expert e owns slots [offset[e], offset[e] +
// count[e]), and an M-tile (expert, first slot, rows) covers up to BM slots of one expert.
// Included by .cu files only.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"
#include "ops/weight.h"

namespace ninfer::ops::cuda {

// One grouped GEMM out[s, n] = A[row(s)] . W_e[n] over the tiles of a tile table, where
// row(s) = a_row_of_slot[s] (gathered from x) or s (a_row_of_slot == nullptr).
//   a: [*, K] rows a_s0 apart    w: [E, *, K] contiguous, w_expert_stride elements per expert
//   fused (gate_up): B rows [0, N) gate, [N, 2N) up of expert e; out = silu(gate) * up in the
//     activation dtype. Otherwise out is F32.
//   tiles: [max_tiles, 4] I32 (expert, first slot, rows, unused); *num_tiles of them are valid.
//     Dense mode (tiles == nullptr, num_tiles == nullptr, tensor-core route only): one weight
//     (expert 0) over rows [0, dense_rows), slot = row.
//   w_scale set: w holds block-wise fp8 codes (ops/weight.h), W_e[n, k] = e4m3(w_e[n, k]) *
//     w_scale[e * scale_expert_stride + (n / block_rows) * scale_cols + k / block_cols]
//     (tensor-core route only; needs K % 16 == 0, block_cols % 64 == 0).
//   Not fused: out is F32, or BF16 with out_bf16; accumulate adds to what out holds.
struct GroupedGemm {
    const void* a = nullptr;
    int64_t a_s0 = 0;
    const int32_t* a_row_of_slot = nullptr;
    const void* w = nullptr;
    int64_t w_expert_stride = 0, K = 0, N = 0;
    const int32_t* tiles = nullptr;
    const int32_t* num_tiles = nullptr;
    int64_t max_tiles = 0;
    void* out = nullptr;
    int64_t out_s0 = 0;
    const float* w_scale = nullptr;
    int64_t scale_expert_stride = 0, scale_cols = 0, block_rows = 0, block_cols = 0;
    int64_t dense_rows = 0;
    bool out_bf16 = false, accumulate = false;
    // Dense mode, not fused: K in k_splits parts, each writing f32 partial sums into partial
    // [k_splits, dense_rows, N], then summed in split order into out (deterministic).
    int k_splits = 1;
    float* partial = nullptr;
};

// M-tile rows of the tensor-core route for `pairs` pairs over E experts: bf16 64 or 128 (128 only
// where ctx's device gives a block its 108 KB of shared memory: not sm_86 / sm_89 / sm_120, nor
// portable mode), fp8 stacks 32, 64 or 128 (all within 99 KB).
int grouped_tile_rows_bf16(const ExecContext& ctx, int64_t pairs, int64_t E);
int grouped_tile_rows_fp8(int64_t pairs, int64_t E);

// The tensor-core GEMMs (bf16 A, bf16 or fp8 weights, K % 8 == 0 (fp8: % 16), N % 8 == 0,
// 16-byte aligned rows): gate_up writes act (bf16) = silu(gate) * up, down writes out. bm as
// chosen above (dense mode: 64 or 128 as well; fp8 also 32).
void grouped_gate_up_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm);
void grouped_down_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm);

// The K splits that keep the SMs busy for a dense-mode GEMM of few row tiles and N blocks.
int dense_k_splits(const ExecContext& ctx, const GroupedGemm& g, int bm);

// Whether the tensor-core route takes fp8 weight w (2-D or a 3-D stack) with K = w's last dim.
bool grouped_fp8_fits(const WeightView& w);
// The GroupedGemm fields of fp8 weight w (w, strides, scale); the caller sets the rest.
void set_fp8_weight(GroupedGemm& g, const WeightView& w);

// The same GEMMs on CUDA cores for any float dtype, shape and alignment (F32 runs here), over
// tiles of kGroupedSimpleRows rows; f32 accumulation in a fixed K order.
constexpr int kGroupedSimpleRows = 32;
void grouped_gemm_cuda_cores(const ExecContext& ctx, const GroupedGemm& g, DType dtype, bool fused);

} // namespace ninfer::ops::cuda
