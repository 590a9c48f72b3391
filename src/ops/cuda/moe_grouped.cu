// Implements the bf16 tensor-core GEMMs of moe_experts' grouped route (moe_grouped.h); moe.cu
// routes the pairs on the device and combines. One block per (M-tile of one expert, N-block):
//   gate_up: A rows gathered straight from x through token_of_slot by cp.async (no gather
//     pass); B = gate rows [n0, n0 + 64) and up rows [I + n0, I + n0 + 64) of expert e, laid out
//     so that each thread holds gate and up of the same (row, column): the epilogue computes
//     silu(g) * u from the f32 accumulators and rounds act to bf16 once.
//   down: A = act rows of the tile, B = 128 rows of down_e; f32 out.
// Both operands are K-contiguous (NT), the layout of mma.sync m16n8k16 with ldmatrix (no
// transposes). 8 warps as 2 (M) x 4 (N), each owning BM/2 rows x 32 B rows (4 n8-tiles);
// K tiles of 64 through a 3-stage cp.async pipeline with one barrier per K tile.
#include <atomic>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/moe_grouped.h"

namespace ninfer::ops::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256; // 8 warps
constexpr int kWarpsM = 2, kWarpsN = 4;
constexpr int kBN = 128;               // B rows per tile (gate_up: 64 gate + 64 up)
constexpr int kBK = 64;                // K per stage: 4 MMA k-steps per barrier
constexpr int kStages = 3;             // 2 K tiles in flight; BM=128 fits 2 blocks per SM
constexpr int kStride = kBK + 8;       // bf16 per smem row: 144-byte rows put the 8 rows
                                       // of one ldmatrix phase on 8 distinct bank groups
constexpr int kChunksPerRow = kBK / 8; // 16-byte cp.async chunks per smem row
constexpr int kRowsPerPass = kThreads / kChunksPerRow; // rows one pass of the block loads

template <int BM> constexpr int smem_bytes() {
    return kStages * (BM + kBN) * kStride * int(sizeof(bf16));
}

__device__ __forceinline__ float silu(float g) {
    return g / (1.0f + __expf(-g));
}

// Global sources of this thread's 16-byte chunks (fixed over K): A rows row0 + 32 i of the
// tile, B rows row0 + 32 i; a null pointer zero-fills (rows past the tile or past N).
template <int BM, bool kFused> struct TileSources {
    const bf16* a[BM / kRowsPerPass];
    const bf16* b[kBN / kRowsPerPass];
    const bf16* any; // a valid global address for the zero-filling copies (not read)

    __device__ TileSources(const GroupedGemm& g, int4 tile, int64_t n0, int row0, int chunk) {
        const bf16* A = static_cast<const bf16*>(g.a);
        const bf16* W = static_cast<const bf16*>(g.w) + int64_t(tile.x) * g.w_expert_stride;
        any = W;
#pragma unroll
        for (int i = 0; i < BM / kRowsPerPass; ++i) {
            const int r = row0 + kRowsPerPass * i;
            const int64_t slot = int64_t(tile.y) + r;
            const int64_t row = g.a_row_of_slot ? g.a_row_of_slot[r < tile.z ? slot : 0] : slot;
            a[i] = r < tile.z ? A + row * g.a_s0 + chunk * 8 : nullptr;
        }
#pragma unroll
        for (int i = 0; i < kBN / kRowsPerPass; ++i) {
            const int r = row0 + kRowsPerPass * i;
            // gate_up: smem rows [0, 64) gate n0 + r, [64, 128) up N + n0 + r - 64.
            const int64_t n = kFused ? n0 + (r % (kBN / 2)) : n0 + r;
            const int64_t w_row = kFused && r >= kBN / 2 ? g.N + n : n;
            b[i] = n < g.N ? W + w_row * g.K + chunk * 8 : nullptr;
        }
    }
};

// Issues the cp.async copies of K tile [k0, k0 + kBK) into one stage.
template <int BM, bool kFused>
__device__ __forceinline__ void load_stage(const TileSources<BM, kFused>& src, int64_t k0,
                                           int64_t K, int row0, int chunk, bf16* sA, bf16* sB) {
    const bool k_ok = k0 + chunk * 8 < K; // K % 8 == 0: a chunk is all in or all out
#pragma unroll
    for (int i = 0; i < BM / kRowsPerPass; ++i) {
        const bool ok = k_ok && src.a[i] != nullptr;
        cp_async_16(sA + (row0 + kRowsPerPass * i) * kStride + chunk * 8,
                    ok ? src.a[i] + k0 : src.any, ok);
    }
#pragma unroll
    for (int i = 0; i < kBN / kRowsPerPass; ++i) {
        const bool ok = k_ok && src.b[i] != nullptr;
        cp_async_16(sB + (row0 + kRowsPerPass * i) * kStride + chunk * 8,
                    ok ? src.b[i] + k0 : src.any, ok);
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
                } else {
                    *reinterpret_cast<float2*>(static_cast<float*>(g.out) + slot * g.out_s0 + n) =
                        make_float2(c[0], c[1]);
                }
            }
        }
}

// Block (tile, N-block) = blockIdx.x split with the N-block fastest, so the blocks resident
// together share their A rows and their expert's weights in L2. Surplus tiles exit.
template <int BM, bool kFused>
__global__ void __launch_bounds__(kThreads, 2) grouped_gemm_bf16(GroupedGemm g, int n_blocks) {
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sA = reinterpret_cast<bf16*>(smem); // [kStages][BM][kStride]
    bf16* sB = sA + kStages * BM * kStride;   // [kStages][kBN][kStride]
    const int t = int(blockIdx.x / unsigned(n_blocks)), nb = int(blockIdx.x % unsigned(n_blocks));
    if (t >= *g.num_tiles) return;
    const int4 tile = reinterpret_cast<const int4*>(g.tiles)[t]; // expert, first slot, rows
    const int64_t n0 = int64_t(nb) * (kFused ? kBN / 2 : kBN);
    const int chunk = threadIdx.x % kChunksPerRow, row0 = threadIdx.x / kChunksPerRow;
    const TileSources<BM, kFused> src(g, tile, n0, row0, chunk);
    const int k_tiles = int((g.K + kBK - 1) / kBK);

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles)
            load_stage(src, int64_t(s) * kBK, g.K, row0, chunk, sA + s * BM * kStride,
                       sB + s * kBN * kStride);
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

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<kStages - 2>(); // K tile kt has landed (this thread's copies)
        __syncthreads();              // ... everyone's; and stage (kt - 1) is free again
        const int next = kt + kStages - 1, ns = next % kStages;
        if (next < k_tiles)
            load_stage(src, int64_t(next) * kBK, g.K, row0, chunk, sA + ns * BM * kStride,
                       sB + ns * kBN * kStride);
        cp_async_commit();
        const int s = kt % kStages;
        mma_stage<BM, kFused>(sA + s * BM * kStride, sB + s * kBN * kStride, wm, wn, acc);
    }
    cp_async_wait<0>();
    store_tile<BM, kFused>(g, tile, n0, wm, wn, acc);
}

template <int BM, bool kFused> void launch(const ExecContext& ctx, const GroupedGemm& g) {
    constexpr int bytes = smem_bytes<BM>();
    auto kernel = grouped_gemm_bf16<BM, kFused>;
    // The smem limit is a per-device attribute: raised once per device, so a graph capture
    // after the first eager call makes no such call.
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
    const int64_t blocks = g.max_tiles * n_blocks;
    require(blocks < (int64_t(1) << 31), "moe_experts: too many pairs for one grid");
    kernel<<<unsigned(blocks), kThreads, bytes, stream_of(ctx)>>>(g, n_blocks);
    check_launch(kFused ? "grouped_gemm_bf16<gate_up>" : "grouped_gemm_bf16<down>");
}

template <bool kFused> void launch_bm(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    if (bm == 128)
        launch<128, kFused>(ctx, g);
    else
        launch<64, kFused>(ctx, g);
}

// The CUDA-core grouped GEMM (F32, or bf16 rows the tensor-core route cannot take): a block
// computes a 32 x 32 output tile of one M-tile (kGroupedSimpleRows), thread (tx, ty) rows ty + 8 i
// of column tx, in f32 with a fixed K order. Semantics as GroupedGemm (moe_grouped.h).
template <typename T, bool kFused>
__global__ void grouped_gemm_simple(GroupedGemm g, int n_blocks) {
    __shared__ float sA[32][33], sB[2][32][33]; // +1 column: conflict-free column reads
    const int t = int(blockIdx.x / unsigned(n_blocks)), nb = int(blockIdx.x % unsigned(n_blocks));
    if (t >= *g.num_tiles) return;
    const int4 tile = reinterpret_cast<const int4*>(g.tiles)[t]; // expert, first slot, rows
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const T* A = static_cast<const T*>(g.a);
    const T* W = static_cast<const T*>(g.w) + int64_t(tile.x) * g.w_expert_stride;
    const T* a_row[4];
    for (int i = 0; i < 4; ++i) {
        const int r = ty + 8 * i;
        const int64_t slot = int64_t(tile.y) + r;
        a_row[i] =
            r >= tile.z ? nullptr : A + (g.a_row_of_slot ? g.a_row_of_slot[slot] : slot) * g.a_s0;
    }
    float acc[2][4] = {};
    for (int64_t k0 = 0; k0 < g.K; k0 += 32) {
        const int64_t k = k0 + tx;
        for (int i = 0; i < 4; ++i) {
            const int r = ty + 8 * i;
            const int64_t n = int64_t(nb) * 32 + r;
            const bool kn = k < g.K && n < g.N;
            sA[r][tx] = a_row[i] && k < g.K ? to_float(a_row[i][k]) : 0.0f;
            sB[0][r][tx] = kn ? to_float(W[n * g.K + k]) : 0.0f;
            if (kFused) sB[1][r][tx] = kn ? to_float(W[(g.N + n) * g.K + k]) : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < 32; ++kk)
            for (int i = 0; i < 4; ++i) {
                acc[0][i] += sA[ty + 8 * i][kk] * sB[0][tx][kk];
                if (kFused) acc[1][i] += sA[ty + 8 * i][kk] * sB[1][tx][kk];
            }
        __syncthreads();
    }
    const int64_t n = int64_t(nb) * 32 + tx;
    for (int i = 0; i < 4; ++i) {
        const int r = ty + 8 * i;
        if (r >= tile.z || n >= g.N) continue;
        const int64_t o = (int64_t(tile.y) + r) * g.out_s0 + n;
        if constexpr (kFused)
            static_cast<T*>(g.out)[o] =
                from_float<T>(acc[0][i] / (1.0f + __expf(-acc[0][i])) * acc[1][i]);
        else
            static_cast<float*>(g.out)[o] = acc[0][i];
    }
}

template <typename T, bool kFused>
void launch_simple(const ExecContext& ctx, const GroupedGemm& g) {
    const int n_blocks = int((g.N + 31) / 32);
    require(g.max_tiles * n_blocks < (int64_t(1) << 31),
            "moe_experts: too many pairs for one grid");
    grouped_gemm_simple<T, kFused>
        <<<unsigned(g.max_tiles * n_blocks), 256, 0, stream_of(ctx)>>>(g, n_blocks);
    check_launch("grouped_gemm_simple");
}

} // namespace

// Every expert's last tile is partly empty: half a tile on average, whatever the expert holds.
// BM = 128 keeps that waste at ~20% from 256 rows per expert (T = 8192 at E = 256, k = 8) and
// reads each weight tile for twice the rows; below ~96 rows per expert (T = 512: 16 rows) the
// empty rows dominate and BM = 64 halves the wasted MMAs.
int grouped_tile_rows_bf16(int64_t pairs, int64_t E) {
    return pairs >= 96 * E ? 128 : 64;
}

void grouped_gate_up_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    launch_bm<true>(ctx, g, bm);
}

void grouped_down_bf16(const ExecContext& ctx, const GroupedGemm& g, int bm) {
    launch_bm<false>(ctx, g, bm);
}

void grouped_gemm_cuda_cores(const ExecContext& ctx, const GroupedGemm& g, DType dtype,
                             bool fused) {
    dispatch_float(dtype, "moe_experts", [&](auto tag) {
        using T = decltype(tag);
        if (fused)
            launch_simple<T, true>(ctx, g);
        else
            launch_simple<T, false>(ctx, g);
    });
}

} // namespace ninfer::ops::cuda
