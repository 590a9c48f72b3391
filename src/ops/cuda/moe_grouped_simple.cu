// The CUDA-core grouped GEMM of moe_experts (moe_grouped.h): F32, or bf16 rows the tensor-core
// route (moe_grouped.cu) cannot take.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/moe_grouped.h"

namespace ninfer::ops::cuda {
namespace {

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
