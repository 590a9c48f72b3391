// The tensor-core route of ops/segment_attention.h (bf16): FlashAttention-2's forward schedule
// with mma.sync (the building blocks of attention_flash.cu, mma.cuh), non-causal within each
// segment. One block per (tile of 64 * kMt query rows of one segment, head): 4 warps own 16 * kMt
// rows each, keep their Q fragments in registers, and stream the segment's keys in tiles of 64
// through a double-buffered cp.async pipeline; S = Q K^T and O += P V run on bf16 m16n8k16 MMAs
// with f32 accumulation and an online softmax in f32 (exp2 domain on the SFU's ex2.approx, the
// scale folded into one FMA per score, the key mask only on a segment's last tile), P rounded
// to bf16.
// Head dims are multiples of 8: Q K^T runs D / 16 k16 steps and, when D % 16 == 8 (the vision
// tower's D = 72), one m16n8k8 step; P V runs D / 8 n-tiles, so no padded dim is computed.
// kMt = 2 (128-row tiles: each K/V fragment read from shared memory serves two MMAs, which
// keeps mma.sync ahead of the shared-memory bandwidth) for D <= 80, 1 above (registers).
// H200 (bench_prefill_ops vision): one 1024x1024 image (T = 4096, 16 heads of 72) 0.35 ms,
// 220 TFLOP/s (197 before the softmax trims above; 168 with 32-key tiles); four images 239.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kWarps = 4;
constexpr unsigned kMaxGridZ = 65535;
constexpr float kLog2e = 1.4426950408889634f;

template <int D> constexpr int kMt = D <= 80 ? 2 : 1; // m-tiles (16 rows) per warp
template <int D> constexpr int kKeys = 64;            // keys per pipeline stage
template <int D> constexpr int kTileRows = 16 * kMt<D>* kWarps;
template <int D> constexpr int kPitch = (D + 15) / 16 * 16 + 8; // bf16; rows shift 4 banks
template <int D, int kTileKeys> constexpr int smem_bytes() {
    return (kTileRows<D> + 2 * 2 * kTileKeys) * kPitch<D> * 2;
}

__device__ __forceinline__ void mma_bf16_1688(float (&d)[4], uint32_t a0, uint32_t a1,
                                              uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

// Two transposed 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_address(row)));
}

// 2^x on the SFU (ex2.approx.ftz: ~2 ulp, 2^-inf = 0), without exp2f's range handling.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Folds one tile of raw scores S into the running max / sum of the thread's rows (g and g + 8 of
// each m-tile), rescales O, and turns S into probabilities: p = 2^(s sl - m sl) with the max m
// over the raw scores (sl > 0, so it is also the max of the scaled ones). kMask: the last tile,
// whose keys from `valid` on are past the segment and weigh nothing. Every tile holds at least
// one key of the segment, so the running max is finite after the first.
template <int MT, int NT, int DT, bool kMask>
__device__ __forceinline__ void online_softmax(float (&S)[MT][NT][4], float (&O)[MT][DT][4],
                                               float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                               int valid, float sl) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float tile_max = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    float& v = S[mt][nt][2 * hf + j];
                    if (kMask && nt * 8 + (lane % 4) * 2 + j >= valid) v = -INFINITY;
                    tile_max = fmaxf(tile_max, v);
                }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            const float new_max = fmaxf(row_max[mt][hf], tile_max);
            const float correction = fast_exp2((row_max[mt][hf] - new_max) * sl);
            row_max[mt][hf] = new_max;
            const float base = new_max * sl;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    float& v = S[mt][nt][2 * hf + j];
                    v = fast_exp2(fmaf(v, sl, -base));
                    sum += v;
                }
            row_sum[mt][hf] = row_sum[mt][hf] * correction + sum;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                O[mt][dt][2 * hf] *= correction;
                O[mt][dt][2 * hf + 1] *= correction;
            }
        }
    }
}

struct FlashArgs {
    const __nv_bfloat16 *q, *k, *v;
    __nv_bfloat16* out;
    int64_t q_s0, q_s1, k_s0, k_s1, v_s0, v_s1, o_s0, o_s1;
    const int32_t* segments;
    int num_segments;
    float scale_log2; // softmax scale * log2(e) > 0: scores live in the exp2 domain
};

// Rows [r0, r0 + count) of head h of t (stride s0, s1) into smem rows of kPitch<D>; rows past
// count are zero-filled.
template <int D, int kRows>
__device__ __forceinline__ void load_rows(const __nv_bfloat16* t, int64_t s0, int64_t s1,
                                          int64_t r0, int64_t count, int h, __nv_bfloat16* dst) {
    constexpr int kChunks = D / 8; // 16-byte chunks per row
    for (int e = threadIdx.x; e < kRows * kChunks; e += kWarps * 32) {
        const int row = e / kChunks, chunk = e % kChunks;
        const bool valid = row < count;
        const int64_t off = valid ? (r0 + row) * s0 + h * s1 + chunk * 8 : 0;
        cp_async_16(dst + row * kPitch<D> + chunk * 8, t + off, valid);
    }
}

template <int D, int kTileKeys>
__device__ __forceinline__ void attend_tile(const FlashArgs& a, int h, int64_t seg0, int64_t n,
                                            int64_t i0, unsigned char* smem) {
    constexpr int MT = kMt<D>, P = kPitch<D>, BM = kTileRows<D>;
    constexpr int KS = D / 16;          // full k16 steps of Q K^T
    constexpr bool kHalf = D % 16 != 0; // one k8 step more
    constexpr int KQ = KS + (kHalf ? 1 : 0);
    constexpr int NT = kTileKeys / 8; // score n-tiles
    constexpr int DT = D / 8;         // output n-tiles
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + BM * P; // [2][kTileKeys][P]
    __nv_bfloat16* sV = sK + 2 * kTileKeys * P;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t rows = min(int64_t(BM), n - i0);

    load_rows<D, BM>(a.q, a.q_s0, a.q_s1, seg0 + i0, rows, h, sQ);
    cp_async_commit();
    load_rows<D, kTileKeys>(a.k, a.k_s0, a.k_s1, seg0, n, h, sK);
    load_rows<D, kTileKeys>(a.v, a.v_s0, a.v_s1, seg0, n, h, sV);
    cp_async_commit();

    float row_max[MT][2], row_sum[MT][2];
    float O[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) row_max[mt][hf] = -INFINITY, row_sum[mt][hf] = 0.0f;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int i = 0; i < 4; ++i) O[mt][dt][i] = 0.0f;
    }
    const bool warp_active = i0 + warp * 16 * MT < n; // else its rows are all past the segment
    uint32_t qf[MT][KQ][4];                           // the warp's Q fragments, for every key tile
    cp_async_wait<1>(); // Q has landed (K and V of the first tile may still be in flight)
    __syncthreads();
    if (warp_active) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int ks = 0; ks < KQ; ++ks)
                ldmatrix_x4(
                    qf[mt][ks],
                    sQ + (warp * 16 * MT + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                        ks * 16 + (lane >> 4) * 8);
    }

    const int key_tiles = int((n + kTileKeys - 1) / kTileKeys);
    for (int kt = 0; kt < key_tiles; ++kt) {
        const int buf = kt & 1;
        if (kt + 1 < key_tiles) {
            const int nb = buf ^ 1;
            const int64_t key0 = int64_t(kt + 1) * kTileKeys;
            load_rows<D, kTileKeys>(a.k, a.k_s0, a.k_s1, seg0 + key0, n - key0, h,
                                    sK + nb * kTileKeys * P);
            load_rows<D, kTileKeys>(a.v, a.v_s0, a.v_s1, seg0 + key0, n - key0, h,
                                    sV + nb * kTileKeys * P);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (warp_active) {
            const __nv_bfloat16* tK = sK + buf * kTileKeys * P;
            const __nv_bfloat16* tV = sV + buf * kTileKeys * P;
            float S[MT][NT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) S[mt][nt][i] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
                for (int np = 0; np < NT / 2; ++np) { // pairs of n-tiles: 16 keys
                    uint32_t kb[4];
                    ldmatrix_x4(kb, tK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + ks * 16 +
                                        ((lane >> 3) & 1) * 8);
                    const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_bf16_16816(S[mt][2 * np], qf[mt][ks], b0);
                        mma_bf16_16816(S[mt][2 * np + 1], qf[mt][ks], b1);
                    }
                }
            }
            if constexpr (kHalf) { // dims [16 KS, D): 8 of them
#pragma unroll
                for (int grp = 0; grp < NT / 4; ++grp) { // 32 keys: four n-tiles of k8
                    uint32_t kb[4];
                    ldmatrix_x4(kb, tK + (grp * 32 + lane) * P + KS * 16);
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
                            mma_bf16_1688(S[mt][grp * 4 + i], qf[mt][KS][0], qf[mt][KS][1], kb[i]);
                }
            }
            const int64_t valid = n - int64_t(kt) * kTileKeys;
            if (valid < kTileKeys)
                online_softmax<MT, NT, DT, true>(S, O, row_max, row_sum, int(valid), a.scale_log2);
            else
                online_softmax<MT, NT, DT, false>(S, O, row_max, row_sum, kTileKeys, a.scale_log2);
                // O += P V: the C layout of two adjacent score n-tiles is the A layout of one
                // 16-key slice.
#pragma unroll
            for (int ks = 0; ks < kTileKeys / 16; ++ks) {
                uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    pa[mt][0] = pack_bf16x2(S[mt][2 * ks][0], S[mt][2 * ks][1]);
                    pa[mt][1] = pack_bf16x2(S[mt][2 * ks][2], S[mt][2 * ks][3]);
                    pa[mt][2] = pack_bf16x2(S[mt][2 * ks + 1][0], S[mt][2 * ks + 1][1]);
                    pa[mt][3] = pack_bf16x2(S[mt][2 * ks + 1][2], S[mt][2 * ks + 1][3]);
                }
                const __nv_bfloat16* vrow =
                    tV + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P + (lane >> 4) * 8;
#pragma unroll
                for (int dp = 0; dp < DT / 2; ++dp) { // pairs of 8-dim n-tiles
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, vrow + dp * 16);
                    const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_bf16_16816(O[mt][2 * dp], pa[mt], b0);
                        mma_bf16_16816(O[mt][2 * dp + 1], pa[mt], b1);
                    }
                }
                if constexpr (DT % 2 != 0) { // the last 8 dims
                    uint32_t vb[2];
                    ldmatrix_x2_trans(vb, tV + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                                              (DT - 1) * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) mma_bf16_16816(O[mt][DT - 1], pa[mt], vb);
                }
            }
        }
        __syncthreads(); // the buffer is refilled two iterations on
    }

    if (!warp_active) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float sum = row_sum[mt][hf];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int64_t row = warp * 16 * MT + mt * 16 + lane / 4 + 8 * hf;
            if (row >= rows) continue;
            const float inv = 1.0f / sum;
            __nv_bfloat16* o = a.out + (seg0 + i0 + row) * a.o_s0 + h * a.o_s1 + (lane % 4) * 2;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<uint32_t*>(o + dt * 8) =
                    pack_bf16x2(O[mt][dt][2 * hf] * inv, O[mt][dt][2 * hf + 1] * inv);
        }
    }
}

template <int D, int kTileKeys>
__global__ void __launch_bounds__(kWarps * 32, 2) segment_attention_flash_bf16(FlashArgs a) {
    pdl_wait_and_release();
    extern __shared__ __align__(16) unsigned char smem[];
    const int h = blockIdx.y;
    const int64_t i0 = int64_t(blockIdx.x) * kTileRows<D>;
    for (int s = blockIdx.z; s < a.num_segments; s += gridDim.z) {
        const int64_t seg0 = a.segments[s], n = a.segments[s + 1] - seg0;
        if (i0 >= n) continue; // uniform over the block
        attend_tile<D, kTileKeys>(a, h, seg0, n, i0, smem);
        __syncthreads(); // before the next segment's tile overwrites shared memory
    }
}

bool aligned16(const TensorView& t) {
    return t.dtype == DType::BF16 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0 &&
           t.stride[0] % 8 == 0 && t.stride[1] % 8 == 0;
}

template <int D, int kTileKeys = kKeys<D>>
void launch(const ExecContext& ctx, const FlashArgs& args, int64_t longest, int64_t S, int64_t nH) {
    // Over 48 KiB of shared memory needs the opt-in, once per device (before any graph capture:
    // the first call of a shape runs eagerly).
    require_shared_memory(ctx, smem_bytes<D, kTileKeys>(), "segment_attention_flash_bf16");
    static std::atomic<uint64_t> opted_in{0};
    const uint64_t bit = uint64_t(1) << (ctx.device.index & 63);
    if (!(opted_in.load() & bit)) {
        check(cudaFuncSetAttribute(segment_attention_flash_bf16<D, kTileKeys>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   smem_bytes<D, kTileKeys>()),
              "segment_attention_flash_bf16: shared memory attribute");
        opted_in.fetch_or(bit);
    }
    const dim3 grid(unsigned((longest + kTileRows<D> - 1) / kTileRows<D>), unsigned(nH),
                    unsigned(std::min<int64_t>(S, kMaxGridZ)));
    launch_pdl(ctx, segment_attention_flash_bf16<D, kTileKeys>, grid, dim3(kWarps * 32),
               smem_bytes<D, kTileKeys>(), args);
    check_launch("segment_attention_flash_bf16");
}

} // namespace

bool segment_attention_flash_supported(const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView& out) {
    const int64_t D = q.size(2);
    const bool dims = D == 16 || D == 32 || D == 64 || D == 72 || D == 80 || D == 96 || D == 128;
    return dims && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
}

void segment_attention_flash(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const int32_t* host_segments,
                             const TensorView& segments, float scale, const TensorView& out) {
    require(segment_attention_flash_supported(q, k, v, out),
            "segment_attention: the tensor-core route does not take ", q.describe());
    require(scale > 0.0f && std::isfinite(scale),
            "segment_attention: the tensor-core route needs a positive scale, got ", scale);
    const int64_t S = segments.size(0) - 1, nH = q.size(1);
    if (q.size(0) == 0 || nH == 0 || S <= 0) return;
    int64_t longest = 0;
    for (int64_t s = 0; s < S; ++s)
        longest = std::max<int64_t>(longest, host_segments[s + 1] - host_segments[s]);
    const FlashArgs args{reinterpret_cast<const __nv_bfloat16*>(q.data),
                         reinterpret_cast<const __nv_bfloat16*>(k.data),
                         reinterpret_cast<const __nv_bfloat16*>(v.data),
                         reinterpret_cast<__nv_bfloat16*>(out.data),
                         q.stride[0],
                         q.stride[1],
                         k.stride[0],
                         k.stride[1],
                         v.stride[0],
                         v.stride[1],
                         out.stride[0],
                         out.stride[1],
                         segments.ptr<int32_t>(),
                         int(S),
                         scale * kLog2e};
    switch (q.size(2)) {
    case 16:
        return launch<16>(ctx, args, longest, S, nH);
    case 32:
        return launch<32>(ctx, args, longest, S, nH);
    case 64:
        return launch<64>(ctx, args, longest, S, nH);
    case 72:
        return launch<72>(ctx, args, longest, S, nH);
    case 80:
        return launch<80>(ctx, args, longest, S, nH);
    case 96:
        return launch<96>(ctx, args, longest, S, nH);
    default:
        return launch<128>(ctx, args, longest, S, nH);
    }
}

} // namespace ninfer::ops::cuda
