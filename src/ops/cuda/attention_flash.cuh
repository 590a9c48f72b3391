// The pieces of the tensor-core prefill kernels (attention_flash.cu: bf16 planes;
// attention_flash_coded.cu: quantized ones) that work on bf16 tiles in shared memory, whatever
// the planes store: the block's work, the query tile, S = Q K^T and O += P V on bf16 m16n8k16
// MMAs with an online softmax in fp32, and the output. Included by those two .cu files only.
#pragma once

#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/kv_cache.h"

namespace ninfer::ops::cuda::flash {

constexpr int kRowsPerWarp = 16; // the MMA's M
constexpr int kWarps = 4;
constexpr int kTileRows = kRowsPerWarp * kWarps; // query rows per block
constexpr int kTileKeys = 32;                    // keys per pipeline stage
constexpr int kPad = 8; // bf16 per smem row of padding: rows shift by 4 banks (no conflicts)
constexpr float kLog2e = 1.4426950408889634f;

struct FlashArgs {
    const __nv_bfloat16 *q, *kc, *vc; // kc, vc: bf16 planes only
    __nv_bfloat16* out;
    int64_t q_s0, q_s1, o_s0, o_s1;
    int64_t cache_s0, cache_s1, cache_s2; // [NB, bs, nKV, D] (in rows for quantized planes)
    const int32_t *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size, group, q_tiles;
    float scale_log2; // softmax scale * log2(e): scores live in the exp2 domain
};

// The cache index of (sequence s, key, kv head) through the block table (cache strides' units).
__device__ __forceinline__ int64_t cache_index(const FlashArgs& a, int s, int kvh, int64_t key) {
    const int32_t block = a.block_table[int64_t(s) * a.block_table_stride + key / a.block_size];
    return block * a.cache_s0 + (key % a.block_size) * a.cache_s1 + kvh * a.cache_s2;
}

// A block's work: query head h of sequence s, rows [i0, i0 + rows) of the sequence's chunk (the
// chunk's rows start at r0), at positions [p0, last]; its keys [0, last] in key_tiles tiles.
struct FlashWork {
    int h, s, kvh, rows, key_tiles;
    int32_t r0;
    int i0;
    int64_t p0, last;
};

// False when the block's query tile is past its sequence's rows (nothing to do).
__device__ __forceinline__ bool flash_work(const FlashArgs& a, FlashWork& w) {
    w.h = blockIdx.x, w.s = blockIdx.z;
    const int tile = a.q_tiles - 1 - int(blockIdx.y); // longest key ranges start first
    w.r0 = a.row_begin[w.s];
    const int32_t n = a.row_begin[w.s + 1] - w.r0;
    w.i0 = tile * kTileRows;
    if (w.i0 >= n) return false;
    w.rows = min(kTileRows, n - w.i0), w.kvh = w.h / a.group;
    w.p0 = a.pos_begin[w.s] + w.i0, w.last = w.p0 + w.rows - 1;
    w.key_tiles = int((w.last + kTileKeys) / kTileKeys);
    return true;
}

// Issues the cp.async copies of the block's query rows into sQ [kTileRows][D + kPad] (zeros past
// the chunk's rows); the caller commits them with its first key tile.
template <int D>
__device__ void load_queries(const FlashArgs& a, const FlashWork& w, __nv_bfloat16* sQ) {
    constexpr int kChunks = D / 8;
    for (int e = threadIdx.x; e < kTileRows * kChunks; e += blockDim.x) {
        const int row = e / kChunks, chunk = e % kChunks;
        const bool valid = row < w.rows;
        const int64_t off = valid ? (w.r0 + w.i0 + row) * a.q_s0 + w.h * a.q_s1 + chunk * 8 : 0;
        cp_async_16(sQ + row * (D + kPad) + chunk * 8, a.q + off, valid);
    }
}

// A thread's share of its warp's 16 rows: rows g and g + 8 (g = lane / 4), their running max and
// sum, and O's C fragments over D / 8 n-tiles of 8 dims.
template <int D> struct FlashState {
    int64_t row_pos[2];
    float row_max[2] = {-FLT_MAX, -FLT_MAX}, row_sum[2] = {0.0f, 0.0f};
    float O[D / 8][4] = {};

    __device__ explicit FlashState(const FlashWork& w) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        row_pos[0] = w.p0 + warp * kRowsPerWarp + lane / 4;
        row_pos[1] = row_pos[0] + 8;
    }
};

// S[nt] (16 rows x 8 keys per n-tile) = Q_warp K_tile^T.
template <int D>
__device__ void scores(const __nv_bfloat16* sQw, const __nv_bfloat16* sK, float (&S)[4][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) S[nt][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4];
        ldmatrix_x4(qa, sQw + ((lane & 7) + ((lane >> 3) & 1) * 8) * (D + kPad) + kk * 16 +
                            (lane >> 4) * 8);
#pragma unroll
        for (int np = 0; np < 2; ++np) { // pairs of n-tiles: 16 keys
            uint32_t kb[4];
            ldmatrix_x4(kb, sK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * (D + kPad) + kk * 16 +
                                ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
            mma_bf16_16816(S[2 * np], qa, b0);
            mma_bf16_16816(S[2 * np + 1], qa, b1);
        }
    }
}

// Masks keys past each row's position (and rows past the sequence), updates the running max
// and sum of the thread's two rows, rescales O, and turns S into probabilities.
template <int D>
__device__ void online_softmax(float (&S)[4][4], int64_t key0, const int64_t (&row_pos)[2],
                               float scale_log2, float (&row_max)[2], float (&row_sum)[2],
                               float (&O)[D / 8][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int half = 0; half < 2; ++half) { // rows g and g + 8
        float tile_max = -FLT_MAX;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int64_t key = key0 + nt * 8 + (lane % 4) * 2 + j;
                float& v = S[nt][2 * half + j];
                v = key <= row_pos[half] ? v * scale_log2 : -FLT_MAX;
                tile_max = fmaxf(tile_max, v);
            }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(row_max[half], tile_max);
        // All keys masked so far: keep everything at zero weight without inf - inf.
        const float base = new_max == -FLT_MAX ? 0.0f : new_max;
        const float correction = exp2f(row_max[half] - base);
        row_max[half] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                float& v = S[nt][2 * half + j];
                v = v == -FLT_MAX ? 0.0f : exp2f(v - base);
                sum += v;
            }
        row_sum[half] = row_sum[half] * correction + sum;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            O[dt][2 * half] *= correction;
            O[dt][2 * half + 1] *= correction;
        }
    }
}

// O += P V_tile, with P taken from the score registers (the C layout of two adjacent n-tiles is
// the A layout of one 16-key slice).
template <int D>
__device__ void accumulate_pv(const float (&P)[4][4], const __nv_bfloat16* sV,
                              float (&O)[D / 8][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
        const uint32_t pa[4] = {pack_bf16x2(P[2 * ks][0], P[2 * ks][1]),
                                pack_bf16x2(P[2 * ks][2], P[2 * ks][3]),
                                pack_bf16x2(P[2 * ks + 1][0], P[2 * ks + 1][1]),
                                pack_bf16x2(P[2 * ks + 1][2], P[2 * ks + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) { // pairs of 8-dim n-tiles
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, sV + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * (D + kPad) +
                                      dp * 16 + (lane >> 4) * 8);
            const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
            mma_bf16_16816(O[2 * dp], pa, b0);
            mma_bf16_16816(O[2 * dp + 1], pa, b1);
        }
    }
}

// Folds the bf16 tile of keys [key0, key0 + kTileKeys) into the warp's rows. Warps whose rows all
// precede this tile only wait for the others.
template <int D>
__device__ __forceinline__ void attend(const FlashArgs& a, const FlashWork& w, FlashState<D>& st,
                                       const __nv_bfloat16* sQ, const __nv_bfloat16* sK,
                                       const __nv_bfloat16* sV, int64_t key0) {
    const int warp = threadIdx.x >> 5;
    if (key0 > w.p0 + warp * kRowsPerWarp + kRowsPerWarp - 1) return;
    float S[4][4];
    scores<D>(sQ + warp * kRowsPerWarp * (D + kPad), sK, S);
    online_softmax<D>(S, key0, st.row_pos, a.scale_log2, st.row_max, st.row_sum, st.O);
    accumulate_pv<D>(S, sV, st.O);
}

// out rows of the thread: O / sum (the sum reduced over the 4 lanes of a row), bf16.
template <int D>
__device__ void store_rows(const FlashArgs& a, const FlashWork& w, const FlashState<D>& st) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float sum = st.row_sum[half];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int row = warp * kRowsPerWarp + lane / 4 + 8 * half;
        if (row >= w.rows) continue;
        const float inv = 1.0f / sum;
        __nv_bfloat16* o = a.out + (w.r0 + w.i0 + row) * a.o_s0 + w.h * a.o_s1 + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
            *reinterpret_cast<uint32_t*>(o + dt * 8) =
                pack_bf16x2(st.O[dt][2 * half] * inv, st.O[dt][2 * half + 1] * inv);
    }
}

} // namespace ninfer::ops::cuda::flash

namespace ninfer::ops::cuda {

// The prefill kernel over quantized planes (attention_flash_coded.cu), grid as flash_prefill's:
// `a` addresses the planes in rows (cache_s2 = 1); D is 64, 128 or 256.
void launch_flash_coded(const ExecContext& ctx, const flash::FlashArgs& a, dim3 grid, int D,
                        const KvPlane& k_cache, const KvPlane& v_cache);
// Its dynamic shared memory per block for head dim D (flash_prefill_supported checks the device
// has it).
int flash_coded_smem_bytes(int D);

} // namespace ninfer::ops::cuda
