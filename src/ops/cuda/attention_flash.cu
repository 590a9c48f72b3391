// Implements the prefill route of ops/attention.h's paged_attention on CUDA tensor cores.
// flash_prefill_bf16: one block per (query head, tile of 64 rows of one sequence); 4 warps own
//   16 rows each and stream the sequence's keys [0, last row's position] in tiles of 32 through
//   a double-buffered cp.async pipeline, with S = Q K^T and O += P V on bf16 m16n8k16 MMAs and an
//   online softmax in fp32 (FlashAttention-2's schedule over the paged cache).
// Chosen when the batch holds a prompt chunk of at least kFlashMinRows rows (see attention.cu).
// Assumes bf16, head dim 64/128/256, 16-byte aligned q/out head rows and cache rows.
#include <cfloat>

#include "ops/cuda/attention_flash.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/mma.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kRowsPerWarp = 16; // the MMA's M
constexpr int kWarps = 4;
constexpr int kTileRows = kRowsPerWarp * kWarps; // query rows per block
constexpr int kTileKeys = 32;                    // keys per pipeline stage
constexpr int kPad = 8; // bf16 per smem row of padding: rows shift by 4 banks (no conflicts)
constexpr float kLog2e = 1.4426950408889634f;

template <int D> constexpr int smem_bytes() {
    return (kTileRows + 2 * 2 * kTileKeys) * (D + kPad) * 2;
}

struct FlashArgs {
    const __nv_bfloat16 *q, *kc, *vc;
    __nv_bfloat16* out;
    int64_t q_s0, q_s1, o_s0, o_s1;
    int64_t cache_s0, cache_s1, cache_s2; // [NB, bs, nKV, D]
    const int32_t *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size, group, q_tiles;
    float scale_log2; // softmax scale * log2(e): scores live in the exp2 domain
};

// Copies keys [key0, key0 + kTileKeys) of (sequence s, kv head) into sK/sV (zeros past `last`).
template <int D>
__device__ void load_kv_tile(const FlashArgs& a, int s, int kvh, int64_t key0, int64_t last,
                             __nv_bfloat16* sK, __nv_bfloat16* sV) {
    constexpr int kChunks = D / 8; // 16-byte chunks per row
    for (int e = threadIdx.x; e < kTileKeys * kChunks; e += blockDim.x) {
        const int row = e / kChunks, chunk = e % kChunks;
        const int64_t key = key0 + row;
        const bool valid = key <= last;
        int64_t off = 0;
        if (valid) {
            const int32_t block =
                a.block_table[int64_t(s) * a.block_table_stride + key / a.block_size];
            off = block * a.cache_s0 + (key % a.block_size) * a.cache_s1 + kvh * a.cache_s2;
        }
        cp_async_16(sK + row * (D + kPad) + chunk * 8, a.kc + off + chunk * 8, valid);
        cp_async_16(sV + row * (D + kPad) + chunk * 8, a.vc + off + chunk * 8, valid);
    }
}

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

template <int D> __global__ void __launch_bounds__(kWarps * 32) flash_prefill_bf16(FlashArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + kTileRows * (D + kPad); // [2][kTileKeys][D + kPad]
    __nv_bfloat16* sV = sK + 2 * kTileKeys * (D + kPad);
    const int h = blockIdx.x, s = blockIdx.z;
    const int tile = a.q_tiles - 1 - int(blockIdx.y); // longest key ranges start first
    const int32_t r0 = a.row_begin[s], n = a.row_begin[s + 1] - r0;
    const int i0 = tile * kTileRows;
    if (i0 >= n) return;
    const int rows = min(kTileRows, n - i0), kvh = h / a.group;
    const int64_t p0 = a.pos_begin[s] + i0, last = p0 + rows - 1; // positions of the tile
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    constexpr int kChunks = D / 8;
    for (int e = threadIdx.x; e < kTileRows * kChunks; e += blockDim.x) {
        const int row = e / kChunks, chunk = e % kChunks;
        const bool valid = row < rows;
        const int64_t off = valid ? (r0 + i0 + row) * a.q_s0 + h * a.q_s1 + chunk * 8 : 0;
        cp_async_16(sQ + row * (D + kPad) + chunk * 8, a.q + off, valid);
    }
    load_kv_tile<D>(a, s, kvh, 0, last, sK, sV);
    cp_async_commit();

    const int64_t row_pos[2] = {p0 + warp * kRowsPerWarp + lane / 4,
                                p0 + warp * kRowsPerWarp + lane / 4 + 8};
    float row_max[2] = {-FLT_MAX, -FLT_MAX}, row_sum[2] = {0.0f, 0.0f};
    float O[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
        for (int i = 0; i < 4; ++i) O[dt][i] = 0.0f;

    const int key_tiles = int((last + kTileKeys) / kTileKeys);
    for (int kt = 0; kt < key_tiles; ++kt) {
        const int buf = kt & 1;
        if (kt + 1 < key_tiles) {
            const int nb = buf ^ 1;
            load_kv_tile<D>(a, s, kvh, int64_t(kt + 1) * kTileKeys, last,
                            sK + nb * kTileKeys * (D + kPad), sV + nb * kTileKeys * (D + kPad));
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int64_t key0 = int64_t(kt) * kTileKeys;
        // Warps whose rows all precede this tile only wait for the others.
        if (key0 <= p0 + warp * kRowsPerWarp + kRowsPerWarp - 1) {
            float S[4][4];
            scores<D>(sQ + warp * kRowsPerWarp * (D + kPad), sK + buf * kTileKeys * (D + kPad), S);
            online_softmax<D>(S, key0, row_pos, a.scale_log2, row_max, row_sum, O);
            accumulate_pv<D>(S, sV + buf * kTileKeys * (D + kPad), O);
        }
        __syncthreads();
    }

#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float sum = row_sum[half];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int row = warp * kRowsPerWarp + lane / 4 + 8 * half;
        if (row >= rows) continue;
        const float inv = 1.0f / sum;
        __nv_bfloat16* o = a.out + (r0 + i0 + row) * a.o_s0 + h * a.o_s1 + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
            *reinterpret_cast<uint32_t*>(o + dt * 8) =
                pack_bf16x2(O[dt][2 * half] * inv, O[dt][2 * half + 1] * inv);
    }
}

bool aligned16(const TensorView& t) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride[0] % 8 == 0 &&
           t.stride[1] % 8 == 0;
}

template <int D> void launch(const FlashArgs& args, dim3 grid, cudaStream_t stream) {
    // Over 48 KiB of shared memory needs the opt-in, per device: set it at every launch (a
    // host-side call of about a microsecond, next to a prefill kernel of milliseconds).
    check(cudaFuncSetAttribute(flash_prefill_bf16<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               smem_bytes<D>()),
          "flash_prefill_bf16: shared memory attribute");
    flash_prefill_bf16<D><<<grid, kWarps * 32, smem_bytes<D>(), stream>>>(args);
    check_launch("flash_prefill_bf16");
}

} // namespace

bool flash_prefill_supported(const TensorView& q, const TensorView& k_cache,
                             const TensorView& out) {
    const int64_t D = q.size(2);
    return q.dtype == DType::BF16 && k_cache.dtype == DType::BF16 && out.dtype == DType::BF16 &&
           (D == 64 || D == 128 || D == 256) && aligned16(q) && aligned16(out) &&
           reinterpret_cast<uintptr_t>(k_cache.data) % 16 == 0 && k_cache.stride[1] % 8 == 0 &&
           k_cache.stride[2] % 8 == 0;
}

void flash_prefill(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                   const TensorView& v_cache, const SeqBatch& batch, float scale,
                   const TensorView& out) {
    const int q_tiles = (batch.max_rows_per_seq + kTileRows - 1) / kTileRows;
    const FlashArgs args{reinterpret_cast<const __nv_bfloat16*>(q.data),
                         reinterpret_cast<const __nv_bfloat16*>(k_cache.data),
                         reinterpret_cast<const __nv_bfloat16*>(v_cache.data),
                         reinterpret_cast<__nv_bfloat16*>(out.data),
                         q.stride[0],
                         q.stride[1],
                         out.stride[0],
                         out.stride[1],
                         k_cache.stride[0],
                         k_cache.stride[1],
                         k_cache.stride[2],
                         batch.row_begin.ptr<int32_t>(),
                         batch.pos_begin.ptr<int32_t>(),
                         batch.block_table.ptr<int32_t>(),
                         batch.block_table_stride,
                         batch.block_size,
                         int(q.size(1) / k_cache.size(2)),
                         q_tiles,
                         scale * kLog2e};
    const dim3 grid(unsigned(q.size(1)), unsigned(q_tiles), unsigned(batch.num_seqs));
    switch (q.size(2)) {
    case 64:
        return launch<64>(args, grid, stream_of(ctx));
    case 128:
        return launch<128>(args, grid, stream_of(ctx));
    default:
        return launch<256>(args, grid, stream_of(ctx));
    }
}

} // namespace ninfer::ops::cuda
