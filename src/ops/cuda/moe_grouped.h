// The grouped (prefill) route of moe_experts on CUDA, shared by moe.cu (device-side routing, the
// CUDA-core fallback, the combine) and moe_grouped.cu (the bf16 tensor-core GEMMs).
// Pairs p = t * k + j are placed in expert order: expert e owns slots [offset[e], offset[e] +
// count[e]), and an M-tile (expert, first slot, rows) covers up to BM slots of one expert.
// Included by .cu files only.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

// One grouped GEMM out[s, n] = A[row(s)] . W_e[n] over the tiles of a tile table, where
// row(s) = a_row_of_slot[s] (gathered from x) or s (a_row_of_slot == nullptr).
//   a: [*, K] rows a_s0 apart    w: [E, *, K] contiguous, w_expert_stride elements per expert
//   fused (gate_up): B rows [0, N) gate, [N, 2N) up of expert e; out = silu(gate) * up in the
//     activation dtype. Otherwise out is F32.
//   tiles: [max_tiles, 4] I32 (expert, first slot, rows, unused); *num_tiles of them are valid.
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
};

// M-tile rows of the tensor-core route for `pairs` pairs over E experts (64 or 128).
int grouped_tile_rows_bf16(int64_t pairs, int64_t E);

// The tensor-core GEMMs (bf16 operands, K % 8 == 0, N % 8 == 0, 16-byte aligned rows):
// gate_up writes act (bf16) = silu(gate) * up, down writes out (F32). bm as chosen above.
void grouped_gate_up_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm);
void grouped_down_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm);

// The same GEMMs on CUDA cores for any float dtype, shape and alignment (F32 runs here), over
// tiles of kGroupedSimpleRows rows; f32 accumulation in a fixed K order.
constexpr int kGroupedSimpleRows = 32;
void grouped_gemm_cuda_cores(const ExecContext& ctx, const GroupedGemm& g, DType dtype, bool fused);

} // namespace ninfer::ops::cuda
