// Implements the bf16 tensor-core GEMMs of moe_experts' grouped route (moe_grouped.h); moe.cu
// routes the pairs on the device and combines. One block per (M-tile of one expert, N-block):
//   gate_up: A rows gathered straight from x through token_of_slot by cp.async (no gather
//     pass); B = gate rows [n0, n0 + 64) and up rows [I + n0, I + n0 + 64) of expert e, laid out
//     so that each thread holds gate and up of the same (row, column): the epilogue computes
//     silu(g) * u from the f32 accumulators and rounds act to bf16 once.
//   down: A = act rows of the tile, B = 128 rows of down_e; f32 out.
//   fp8 weights (GroupedGemm::w_scale set): the B codes come in through their own cp.async
//     stages (one byte a weight from HBM) and each thread turns the chunks it copied into bf16
//     (code x block scale in f32, rounded once: the values dequantize_fp8 writes) in one
//     converted B tile before the MMAs, so the result is bit-identical to dequantize + bf16.
//   dense mode (tiles == nullptr): rows [0, dense_rows) of one weight, the fp8 linear's route.
// Both operands are K-contiguous (NT), the layout of mma.sync m16n8k16 with ldmatrix (no
// transposes). 8 warps as 2 (M) x 4 (N), each owning BM/2 rows x 32 B rows (4 n8-tiles);
// K tiles of 64 through a 3-stage cp.async pipeline with one barrier per K tile.
#include <algorithm>
#include <atomic>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/moe_grouped.h"

namespace ninfer::ops::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256; // 8 warps
constexpr int kWarpsM = 2, kWarpsN = 4;
constexpr int kBN = 128;               // B rows per tile (gate_up: 64 gate + 64 up)
constexpr int kBK = 64;                // K per stage: 4 MMA k-steps per barrier
constexpr int kStride = kBK + 8;       // bf16 per smem row: 144-byte rows put the 8 rows
                                       // of one ldmatrix phase on 8 distinct bank groups
constexpr int kChunksPerRow = kBK / 8; // 16-byte cp.async chunks per smem row
constexpr int kRowsPerPass = kThreads / kChunksPerRow; // rows one pass of the block loads
constexpr int kCodeChunksPerRow = kBK / 16;           // fp8: 16 codes per 16-byte chunk
constexpr int kCodeRowsPerPass = kThreads / kCodeChunksPerRow;

// cp.async stages (stages - 1 K tiles in flight), as many as keep 2 blocks per SM (<= ~113 KB
// each): bf16 3 (BM = 128: 110 KB). fp8 B stages are half the bytes, so the smaller tiles the
// fp8 routes use for few rows keep more weight bytes in flight: BM 128 3 (96 KB), 64 4 (86 KB),
// 32 6 (93 KB).
template <int BM, bool kFp8> constexpr int stages() {
    return kFp8 && BM == 32 ? 6 : kFp8 && BM == 64 ? 4 : 3;
}

// bf16: stages of A and B. fp8: stages of A and of B's codes (kBK bytes a row: 4 threads read
// one row's 64 bytes, 8 of them 128 contiguous bytes, conflict-free), plus one converted B tile.
template <int BM, bool kFp8> constexpr int smem_bytes() {
    constexpr int S = stages<BM, kFp8>();
    return kFp8 ? S * BM * kStride * int(sizeof(bf16)) + S * kBN * kBK +
                      kBN * kStride * int(sizeof(bf16))
                : S * (BM + kBN) * kStride * int(sizeof(bf16));
}

// Tile t of the grid: the tile table's entry, or in dense mode (0, t * BM, rows left).
template <int BM> __device__ __forceinline__ int4 tile_of(const GroupedGemm& g, int t) {
    if (g.tiles) return reinterpret_cast<const int4*>(g.tiles)[t];
    const int64_t first = int64_t(t) * BM;
    return make_int4(0, int(first), int(min(int64_t(BM), g.dense_rows - first)), 0);
}

// gate_up: smem B rows [0, 64) are gate rows n0 + r, [64, 128) up rows N + n0 + r - 64.
template <bool kFused> struct BRow {
    int64_t n, w_row;
    __device__ BRow(const GroupedGemm& g, int64_t n0, int r)
        : n(kFused ? n0 + (r % (kBN / 2)) : n0 + r), w_row(kFused && r >= kBN / 2 ? g.N + n : n) {}
};

__device__ __forceinline__ float silu(float g) {
    return g / (1.0f + __expf(-g));
}

// Global sources of this thread's 16-byte chunks (fixed over K): A rows row0 + 32 i of the
// tile; B rows row0 + 32 i (bf16) or code rows crow0 + 64 i with their scale rows (fp8). A null
// pointer zero-fills (rows past the tile or past N).
template <int BM, bool kFused, bool kFp8> struct TileSources {
    static constexpr int kBPasses = kFp8 ? kBN / kCodeRowsPerPass : kBN / kRowsPerPass;
    const bf16* a[BM / kRowsPerPass];
    const unsigned char* b[kBPasses];
    const float* scale[kFp8 ? kBPasses : 1]; // fp8: the scale row of b[i] (null with b[i])
    const void* any; // a valid global address for the zero-filling copies (not read)

    __device__ TileSources(const GroupedGemm& g, int4 tile, int64_t n0, int row0, int chunk,
                           int crow0, int cchunk) {
        const bf16* A = static_cast<const bf16*>(g.a);
        const int64_t w_elem = kFp8 ? 1 : int64_t(sizeof(bf16));
        const auto* W = static_cast<const unsigned char*>(g.w) +
                        int64_t(tile.x) * g.w_expert_stride * w_elem;
        any = W;
#pragma unroll
        for (int i = 0; i < BM / kRowsPerPass; ++i) {
            const int r = row0 + kRowsPerPass * i;
            const int64_t slot = int64_t(tile.y) + r;
            const int64_t row = g.a_row_of_slot ? g.a_row_of_slot[r < tile.z ? slot : 0] : slot;
            a[i] = r < tile.z ? A + row * g.a_s0 + chunk * 8 : nullptr;
        }
#pragma unroll
        for (int i = 0; i < kBPasses; ++i) {
            const int r = kFp8 ? crow0 + kCodeRowsPerPass * i : row0 + kRowsPerPass * i;
            const BRow<kFused> br(g, n0, r);
            const bool in = br.n < g.N;
            b[i] = in ? W + (br.w_row * g.K + (kFp8 ? cchunk * 16 : chunk * 8)) * w_elem : nullptr;
            if constexpr (kFp8)
                scale[i] = in ? g.w_scale + int64_t(tile.x) * g.scale_expert_stride +
                                    (br.w_row / g.block_rows) * g.scale_cols
                              : nullptr;
        }
    }
};

// Issues the cp.async copies of K tile [k0, k0 + kBK) into one stage (sB: bf16 rows, or code
// rows of kBK bytes for fp8).
template <int BM, bool kFused, bool kFp8>
__device__ __forceinline__ void load_stage(const TileSources<BM, kFused, kFp8>& src, int64_t k0,
                                           int64_t K, int row0, int chunk, int crow0, int cchunk,
                                           bf16* sA, void* sB) {
    const bool k_ok = k0 + chunk * 8 < K; // K % 8 == 0: a chunk is all in or all out
#pragma unroll
    for (int i = 0; i < BM / kRowsPerPass; ++i) {
        const bool ok = k_ok && src.a[i] != nullptr;
        cp_async_16(sA + (row0 + kRowsPerPass * i) * kStride + chunk * 8,
                    ok ? src.a[i] + k0 : src.any, ok);
    }
    using Src = TileSources<BM, kFused, kFp8>;
#pragma unroll
    for (int i = 0; i < Src::kBPasses; ++i) {
        if constexpr (kFp8) {
            const bool ok = k0 + cchunk * 16 < K && src.b[i] != nullptr; // K % 16 == 0
            cp_async_16(static_cast<unsigned char*>(sB) + (crow0 + kCodeRowsPerPass * i) * kBK +
                            cchunk * 16,
                        ok ? src.b[i] + k0 : src.any, ok);
        } else {
            const bool ok = k_ok && src.b[i] != nullptr;
            cp_async_16(static_cast<bf16*>(sB) + (row0 + kRowsPerPass * i) * kStride + chunk * 8,
                        ok ? src.b[i] + k0 * int64_t(sizeof(bf16)) : src.any, ok);
        }
    }
}

// fp8: this thread's code chunks of one stage (copied by this thread, so no barrier is needed
// for them) into the converted B tile: bf16(code * scale), the scale of K tile k0's column block
// (block_cols % kBK == 0: one per tile). Zero-filled rows have no scale and give zeros.
template <int BM, bool kFused>
__device__ __forceinline__ void convert_codes(const TileSources<BM, kFused, true>& src,
                                              const GroupedGemm& g, int64_t k0, int crow0,
                                              int cchunk, const unsigned char* sB8, bf16* sBc) {
    const int64_t scale_col = k0 / g.block_cols;
#pragma unroll
    for (int i = 0; i < TileSources<BM, kFused, true>::kBPasses; ++i) {
        const int r = crow0 + kCodeRowsPerPass * i;
        float v[16];
        fp8x16_to_float(*reinterpret_cast<const uint4*>(sB8 + r * kBK + cchunk * 16), v);
        const float sc = src.scale[i] ? src.scale[i][scale_col] : 0.0f;
        uint32_t packed[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) packed[j] = pack_bf16x2(v[2 * j] * sc, v[2 * j + 1] * sc);
        uint4* d = reinterpret_cast<uint4*>(sBc + r * kStride + cchunk * 16);
        d[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        d[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
    }
}

// acc[mi][j] += A_warp(mi) B_warp(j)^T over one stage (kBK); the warp's 4 n8-tiles are two
// ldmatrix.x4 pairs at B rows nbase(jp) (gate_up: jp 0 gate, jp 1 up of the same columns).
template <int BM, bool kFused>
__device__ __forceinline__ void mma_stage(const bf16* sA, const bf16* sB, int wm, int wn,
                                          float (&acc)[BM / 32][4][4]) {
    constexpr int MI = BM / kWarpsM / 16;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t af[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            ldmatrix_x4(af[mi], sA + (wm * (BM / kWarpsM) + mi * 16 + (lane & 15)) * kStride +
                                    kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
            const int nbase = kFused ? jp * (kBN / 2) + wn * 16 : wn * 32 + jp * 16;
            uint32_t bq[4];
            ldmatrix_x4(bq, sB + (nbase + (lane & 7) + (lane >> 4) * 8) * kStride + kk * 16 +
                                ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                mma_bf16_16816(acc[mi][2 * jp], af[mi], b0);
                mma_bf16_16816(acc[mi][2 * jp + 1], af[mi], b1);
            }
        }
    }
}

// Stores the warp's accumulators: gate_up act[slot, n] = silu(g) * u as bf16 pairs (n-tiles
// j and j + 2 hold gate and up of the same columns), down out[slot, n] as float2.
template <int BM, bool kFused>
__device__ __forceinline__ void store_tile(const GroupedGemm& g, int4 tile, int64_t n0, int wm,
                                           int wn, const float (&acc)[BM / 32][4][4]) {
    constexpr int MI = BM / kWarpsM / 16;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int half = 0; half < 2; ++half) { // C rows g and g + 8
            const int r = wm * (BM / kWarpsM) + mi * 16 + lane / 4 + half * 8;
            if (r >= tile.z) continue;
            const int64_t slot = int64_t(tile.y) + r;
#pragma unroll
            for (int j = 0; j < (kFused ? 2 : 4); ++j) {
                const int64_t n = n0 + (kFused ? wn * 16 : wn * 32) + j * 8 + (lane % 4) * 2;
                if (n >= g.N) continue; // N % 8 == 0: both columns in or out
                const float* c = acc[mi][j] + 2 * half;
                if constexpr (kFused) {
                    const float* u = acc[mi][j + 2] + 2 * half;
                    *reinterpret_cast<uint32_t*>(static_cast<bf16*>(g.out) + slot * g.out_s0 + n) =
                        pack_bf16x2(silu(c[0]) * u[0], silu(c[1]) * u[1]);
                } else if (g.out_bf16) {
                    auto* o = reinterpret_cast<uint32_t*>(static_cast<bf16*>(g.out) +
                                                          slot * g.out_s0 + n);
                    float2 v = make_float2(c[0], c[1]);
                    if (g.accumulate) {
                        const float2 old = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(o));
                        v.x += old.x, v.y += old.y;
                    }
                    *o = pack_bf16x2(v.x, v.y);
                } else {
                    auto* o = reinterpret_cast<float2*>(static_cast<float*>(g.out) +
                                                        slot * g.out_s0 + n);
                    float2 v = make_float2(c[0], c[1]);
                    if (g.accumulate) v.x += o->x, v.y += o->y;
                    *o = v;
                }
            }
        }
}

// Block (tile, N-block) = blockIdx.x split with the N-block fastest, so the blocks resident
// together share their A rows and their expert's weights in L2. Surplus tiles exit.
template <int BM, bool kFused, bool kFp8>
__global__ void __launch_bounds__(kThreads, 2) grouped_gemm_tc(GroupedGemm g, int n_blocks) {
    constexpr int kStages = stages<BM, kFp8>();
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sA = reinterpret_cast<bf16*>(smem); // [kStages][BM][kStride]
    // [kStages][kBN][kStride] bf16, or fp8 codes [kStages][kBN][kBK] then sBc [kBN][kStride].
    unsigned char* sB = smem + kStages * BM * kStride * int(sizeof(bf16));
    constexpr int kBStageBytes = kFp8 ? kBN * kBK : kBN * kStride * int(sizeof(bf16));
    bf16* sBc = reinterpret_cast<bf16*>(sB + kStages * kBStageBytes); // fp8 only
    const int t = int(blockIdx.x / unsigned(n_blocks)), nb = int(blockIdx.x % unsigned(n_blocks));
    if (g.num_tiles && t >= *g.num_tiles) return;
    const int4 tile = tile_of<BM>(g, t); // expert, first slot, rows
    const int64_t n0 = int64_t(nb) * (kFused ? kBN / 2 : kBN);
    const int chunk = threadIdx.x % kChunksPerRow, row0 = threadIdx.x / kChunksPerRow;
    const int cchunk = threadIdx.x % kCodeChunksPerRow, crow0 = threadIdx.x / kCodeChunksPerRow;
    const TileSources<BM, kFused, kFp8> src(g, tile, n0, row0, chunk, crow0, cchunk);
    // K tiles [kt0, kt1): all of K, or split blockIdx.y of g.k_splits (dense mode).
    const int k_tiles = int((g.K + kBK - 1) / kBK);
    const int per_split = (k_tiles + g.k_splits - 1) / g.k_splits;
    const int kt0 = int(blockIdx.y) * per_split, kt1 = min(k_tiles, kt0 + per_split);

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (kt0 + s < kt1)
            load_stage(src, int64_t(kt0 + s) * kBK, g.K, row0, chunk, crow0, cchunk,
                       sA + s * BM * kStride, sB + s * kBStageBytes);
        cp_async_commit(); // empty groups keep the wait count uniform
    }
    const int warp = threadIdx.x >> 5, wm = warp / kWarpsN, wn = warp % kWarpsN;
    float acc[BM / 32][4][4];
#pragma unroll
    for (int mi = 0; mi < BM / 32; ++mi)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mi][j][i] = 0.0f;

    for (int kt = kt0; kt < kt1; ++kt) {
        cp_async_wait<kStages - 2>(); // K tile kt has landed (this thread's copies)
        __syncthreads(); // ... everyone's; stage (kt - 1) and the converted tile are free again
        const int next = kt + kStages - 1, ns = (next - kt0) % kStages;
        if (next < kt1)
            load_stage(src, int64_t(next) * kBK, g.K, row0, chunk, crow0, cchunk,
                       sA + ns * BM * kStride, sB + ns * kBStageBytes);
        cp_async_commit();
        const int s = (kt - kt0) % kStages;
        const bf16* b_tile = reinterpret_cast<const bf16*>(sB + s * kBStageBytes);
        if constexpr (kFp8) {
            convert_codes<BM, kFused>(src, g, int64_t(kt) * kBK, crow0, cchunk,
                                      sB + s * kBStageBytes, sBc);
            __syncthreads(); // the converted tile is complete
            b_tile = sBc;
        }
        mma_stage<BM, kFused>(sA + s * BM * kStride, b_tile, wm, wn, acc);
    }
    cp_async_wait<0>();
    if (g.k_splits == 1) return store_tile<BM, kFused>(g, tile, n0, wm, wn, acc);
    // Split K: this split's f32 partial sums, reduced in split order by reduce_splits.
    GroupedGemm part = g;
    part.out = g.partial + int64_t(blockIdx.y) * g.dense_rows * g.N;
    part.out_s0 = g.N;
    part.out_bf16 = part.accumulate = false;
    store_tile<BM, kFused>(part, tile, n0, wm, wn, acc);
}

// out[r, n] (+)= sum over s in order of partial[s, r, n]: the split-K epilogue (deterministic).
__global__ void reduce_splits(GroupedGemm g) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= g.dense_rows * g.N) return;
    const int64_t r = i / g.N, n = i % g.N, plane = g.dense_rows * g.N;
    float sum = 0.0f;
    for (int s = 0; s < g.k_splits; ++s) sum += g.partial[s * plane + i];
    if (g.out_bf16) {
        bf16* o = static_cast<bf16*>(g.out) + r * g.out_s0 + n;
        *o = __float2bfloat16_rn(g.accumulate ? __bfloat162float(*o) + sum : sum);
    } else {
        float* o = static_cast<float*>(g.out) + r * g.out_s0 + n;
        *o = g.accumulate ? *o + sum : sum;
    }
}

template <int BM, bool kFused, bool kFp8> void launch(const ExecContext& ctx, const GroupedGemm& g) {
    constexpr int bytes = smem_bytes<BM, kFp8>();
    auto kernel = grouped_gemm_tc<BM, kFused, kFp8>;
    // The smem limit is a per-device attribute: raised once per device, so a graph capture
    // after the first eager call makes no such call.
    const char* name = kFused ? "grouped_gemm_tc<gate_up>" : "grouped_gemm_tc<down>";
    require_shared_memory(ctx, bytes, name);
    static std::atomic<uint64_t> raised{0};
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    const uint64_t bit = uint64_t(1) << (device % 64);
    if (!(raised.load(std::memory_order_acquire) & bit)) {
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
              "moe grouped gemm smem");
        raised.fetch_or(bit, std::memory_order_release);
    }
    const int64_t cols = kFused ? kBN / 2 : kBN;
    const int n_blocks = int((g.N + cols - 1) / cols);
    const int64_t tiles = g.tiles ? g.max_tiles : (g.dense_rows + BM - 1) / BM;
    const int64_t blocks = tiles * n_blocks;
    require(blocks < (int64_t(1) << 31), "grouped gemm: too many rows for one grid");
    if (blocks == 0) return;
    require(g.k_splits == 1 || (!kFused && !g.tiles && g.partial),
            "grouped gemm: split K is for dense mode with a partial-sum buffer");
    kernel<<<dim3(unsigned(blocks), unsigned(g.k_splits)), kThreads, bytes, stream_of(ctx)>>>(
        g, n_blocks);
    check_launch(name);
    if (g.k_splits > 1) {
        const int64_t n = g.dense_rows * g.N;
        reduce_splits<<<unsigned((n + 255) / 256), 256, 0, stream_of(ctx)>>>(g);
        check_launch("reduce_splits");
    }
}

template <bool kFused> void launch_bm(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    const bool fp8 = g.w_scale != nullptr;
    require(bm != 32 || fp8, "grouped gemm: 32-row tiles are for fp8 weights");
    if (bm == 128)
        fp8 ? launch<128, kFused, true>(ctx, g) : launch<128, kFused, false>(ctx, g);
    else if (bm == 64)
        fp8 ? launch<64, kFused, true>(ctx, g) : launch<64, kFused, false>(ctx, g);
    else
        launch<32, kFused, true>(ctx, g);
}

} // namespace

// Every expert's last tile is partly empty: half a tile on average, whatever the expert holds.
// BM = 128 keeps that waste at ~20% from 256 rows per expert (T = 8192 at E = 256, k = 8) and
// reads each weight tile for twice the rows; below ~96 rows per expert (T = 512: 16 rows) the
// empty rows dominate and BM = 64 halves the wasted MMAs. BM = 128's 108 KB of shared memory is
// more than sm_86 / sm_89 / sm_120 give a block: 64 there.
int grouped_tile_rows_bf16(const ExecContext& ctx, int64_t pairs, int64_t E) {
    const bool fits = shared_memory_fits(ctx.device.index, size_t(smem_bytes<128, false>()));
    return pairs >= 96 * E && fits ? 128 : 64;
}

// fp8 stacks: the same, and 32-row tiles (6 stages) below ~24 rows per expert (T = 768 at E =
// 256, k = 8), where the weight stream, not the MMAs, bounds the GEMM.
int grouped_tile_rows_fp8(int64_t pairs, int64_t E) {
    return pairs >= 96 * E ? 128 : pairs >= 24 * E ? 64 : 32;
}

void grouped_gate_up_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    launch_bm<true>(ctx, g, bm);
}

void grouped_down_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    launch_bm<false>(ctx, g, bm);
}

int dense_k_splits(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    const int64_t blocks = (g.dense_rows + bm - 1) / bm * ((g.N + kBN - 1) / kBN);
    const int64_t k_tiles = (g.K + kBK - 1) / kBK;
    // Two resident blocks per SM (__launch_bounds__), two waves of them: enough bytes in flight
    // to stream the weight; each split keeps >= 8 K tiles so the pipeline fills.
    const int64_t want = (4 * int64_t(sm_count(ctx)) + blocks - 1) / std::max<int64_t>(blocks, 1);
    return int(std::clamp<int64_t>(std::min(want, k_tiles / 8), 1, 16));
}

bool grouped_fp8_fits(const WeightView& w) {
    const int nd = w.w.ndim;
    if (!w.is_fp8() || (nd != 2 && nd != 3)) return false;
    return w.size(nd - 1) % 16 == 0 && w.block_rows >= 1 && w.block_cols % kBK == 0 &&
           w.block_cols > 0 && reinterpret_cast<uintptr_t>(w.w.data) % 16 == 0 &&
           w.w.is_contiguous() && w.scale.is_contiguous();
}

void set_fp8_weight(GroupedGemm& g, const WeightView& w) {
    const int nd = w.w.ndim;
    g.w = w.w.data;
    g.w_expert_stride = nd == 3 ? w.size(1) * w.size(2) : 0;
    g.w_scale = w.scale.ptr<float>();
    g.scale_cols = w.scale.size(nd - 1);
    g.scale_expert_stride = nd == 3 ? w.scale.size(1) * w.scale.size(2) : 0;
    g.block_rows = w.block_rows;
    g.block_cols = w.block_cols;
}

} // namespace ninfer::ops::cuda
