// The tensor-core chunked gated delta rule, pass 1 (formulas in gated_delta_rule_chunked_tc.cuh).
// tc_prepare_kernel: one block per (sequence, chunk, key head), all chunks in parallel; 8 warps.
//   Kr Kr^T and Qr Kr^T (64x64x128) on bf16 mmas from the raw rows (exact products, f32 sums),
//   scaled by the row norms into f32 tiles shared by the key head's Hv/Hk value heads; then per
//   value head: M and A with that head's decays, T = (I + M)^-1 by forward substitution in f32
//   (4 lanes per column of T), and Tb = T diag(beta) split into three bf16 terms, A in bf16 and
//   the per-row scalars to the workspace.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gated_delta_rule_chunked_tc.cuh"

namespace ninfer::ops::cuda {
namespace {
using namespace gdn_tc;

constexpr int kThreads = 256;       // 8 warps: the 64x64 products as 4 row tiles x 2 col halves,
                                    // and the substitution as 64 columns x 4 lanes
constexpr int kF32Row = kChunk + 1; // f32 64x64 tiles: odd stride spreads column walks over banks
// M for the substitution, permuted so lane p of a column's four reads row t's j = 4m + p as
// contiguous float4s: M[t][j] at t * kMRow + (j % 4) * kMGroup + j / 4. Groups of 20 floats put
// the four lanes' float4 reads in distinct bank quads (0, 20, 40, 60 mod 32 = 0, 20, 8, 28).
constexpr int kMGroup = 20;
constexpr int kMRow = 4 * kMGroup;

struct PrepSmem {
    __nv_bfloat16 *K, *Q;          // [kChunk][kKRow]   raw rows (zero past n and dk)
    float *KK, *QK;                // [kChunk][kF32Row] Kr.Kr kinv kinv, Qr.Kr qinv kinv
    float* M;                      // [kChunk][kMRow] permuted M; then T as [kChunk][kF32Row]
    float *kinv, *qinv, *G, *beta; // [kChunk]
};

constexpr size_t kSmemBytes = sizeof(__nv_bfloat16) * 2 * kChunk * kKRow +
                              sizeof(float) * (2 * kChunk * kF32Row + kChunk * kMRow + 4 * kChunk);

__device__ PrepSmem prep_layout(unsigned char* p) {
    PrepSmem m;
    m.K = reinterpret_cast<__nv_bfloat16*>(p);
    m.Q = m.K + kChunk * kKRow;
    m.M = reinterpret_cast<float*>(m.Q + kChunk * kKRow); // 16-byte aligned (float4 reads)
    m.KK = m.M + kChunk * kMRow;
    m.QK = m.KK + kChunk * kF32Row;
    m.kinv = m.QK + kChunk * kF32Row;
    m.qinv = m.kinv + kChunk;
    m.G = m.qinv + kChunk;
    m.beta = m.G + kChunk;
    return m;
}

// Rows [r0, r0 + n) of key head hk of q and k into m.Q, m.K; then the row norms' inverses.
__device__ void load_rows(const GdnArgs& a, int hk, Rows ch, const PrepSmem& m) {
    const auto* kb = static_cast<const __nv_bfloat16*>(a.k);
    const auto* qb = static_cast<const __nv_bfloat16*>(a.q);
    const auto valid = [&](int t, int sg) { return t < ch.n && sg * 8 < a.dk; };
    copy_tile(
        m.K, kKRow, kChunk, kDk / 8, kb,
        [&](int t, int sg) { return kb + (ch.r0 + t) * a.k_s0 + hk * a.k_s1 + sg * 8; }, valid);
    copy_tile(
        m.Q, kKRow, kChunk, kDk / 8, qb,
        [&](int t, int sg) { return qb + (ch.r0 + t) * a.q_s0 + hk * a.q_s1 + sg * 8; }, valid);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // One warp per row, lane l sums elements 4l..4l+3 (the padding is zero).
    const int lane = threadIdx.x & 31;
    const float q_scale = rsqrtf(float(a.dk));
    for (int t = threadIdx.x >> 5; t < kChunk; t += kThreads / 32) {
        float sk = 0.0f, sq = 0.0f;
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const float kv = __bfloat162float(m.K[t * kKRow + 4 * lane + x]);
            const float qv = __bfloat162float(m.Q[t * kKRow + 4 * lane + x]);
            sk += kv * kv;
            sq += qv * qv;
        }
        sk = warp_sum(sk);
        sq = warp_sum(sq);
        if (lane == 0) {
            m.kinv[t] = rsqrtf(sk + 1e-6f); // eps on the sum of squares (the contract)
            m.qinv[t] = rsqrtf(sq + 1e-6f) * q_scale;
        }
    }
    __syncthreads();
}

// KK = Kr Kr^T and QK = Qr Kr^T on tensor cores, normalised into f32 tiles. Warp w owns rows
// 16 (w % 4) .. +15 and columns 32 (w / 4) .. +31 (four 16x8 tiles of each product).
__device__ void key_products(int dk, const PrepSmem& m) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int t0 = 16 * (warp & 3), j0 = 32 * (warp >> 2);
    float kk[4][4] = {}, qk[4][4] = {};
#pragma unroll
    for (int ks = 0; ks < kDk / 16; ++ks) {
        if (16 * ks >= dk) break;
        uint32_t ka[4], qa[4];
        const int a_off =
            (t0 + (lane & 7) + ((lane >> 3) & 1) * 8) * kKRow + 16 * ks + (lane >> 4) * 8;
        ldmatrix_x4(ka, m.K + a_off);
        ldmatrix_x4(qa, m.Q + a_off);
#pragma unroll
        for (int np = 0; np < 2; ++np) { // B = Kr^T: rows j of Kr, k = i
            uint32_t b[4];
            ldmatrix_x4(b, m.K + (j0 + 16 * np + (lane & 7) + (lane >> 4) * 8) * kKRow + 16 * ks +
                               ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma_bf16_16816(kk[2 * np], ka, b0);
            mma_bf16_16816(kk[2 * np + 1], ka, b1);
            mma_bf16_16816(qk[2 * np], qa, b0);
            mma_bf16_16816(qk[2 * np + 1], qa, b1);
        }
    }
    // Accumulator element e of tile nt: row t0 + lane/4 (+8 for e >= 2), col j0 + 8 nt + 2 (lane%4)
    // + e%2.
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int t = t0 + (lane >> 2) + (e >> 1) * 8,
                      j = j0 + 8 * nt + 2 * (lane & 3) + (e & 1);
            m.KK[t * kF32Row + j] = kk[nt][e] * m.kinv[t] * m.kinv[j];
            m.QK[t * kF32Row + j] = qk[nt][e] * m.qinv[t] * m.kinv[j];
        }
    __syncthreads();
}

// Value head h's beta (0 past n) and inclusive prefix sum G of g over the chunk (warp 0).
__device__ void load_gates(const GdnArgs& a, int h, Rows ch, const PrepSmem& m) {
    if (threadIdx.x < kChunk) {
        const int t = threadIdx.x;
        m.beta[t] = t < ch.n ? a.beta[(ch.r0 + t) * a.beta_s0 + h] : 0.0f;
    }
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float x0 = lane < ch.n ? a.g[(ch.r0 + lane) * a.g_s0 + h] : 0.0f;
        float x1 = lane + 32 < ch.n ? a.g[(ch.r0 + lane + 32) * a.g_s0 + h] : 0.0f;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const float y0 = __shfl_up_sync(0xffffffffu, x0, off);
            const float y1 = __shfl_up_sync(0xffffffffu, x1, off);
            if (lane >= off) {
                x0 += y0;
                x1 += y1;
            }
        }
        x1 += __shfl_sync(0xffffffffu, x0, 31);
        m.G[lane] = x0;
        m.G[lane + 32] = x1;
    }
    __syncthreads();
}

// M (permuted, zero outside j < t < n) to smem; A (bf16) and the row scalars to the workspace.
__device__ void decay_products(const GdnArgs& a, const TcWork& w, int h, Rows ch,
                               const PrepSmem& m) {
    const int n = ch.n;
    for (int e = threadIdx.x; e < kChunk * kChunk; e += kThreads) {
        const int t = e / kChunk, j = e % kChunk;
        const float v =
            j < t && t < n ? m.beta[t] * __expf(m.G[t] - m.G[j]) * m.KK[t * kF32Row + j] : 0.0f;
        m.M[t * kMRow + (j & 3) * kMGroup + (j >> 2)] = v;
    }
    for (int e = threadIdx.x; e < n * (kChunk / 2); e += kThreads) {
        const int t = e / (kChunk / 2), j = 2 * (e % (kChunk / 2));
        const float a0 = j <= t ? __expf(m.G[t] - m.G[j]) * m.QK[t * kF32Row + j] : 0.0f;
        const float a1 =
            j + 1 <= t ? __expf(m.G[t] - m.G[j + 1]) * m.QK[t * kF32Row + j + 1] : 0.0f;
        *reinterpret_cast<__nv_bfloat162*>(w.A + ((ch.r0 + t) * a.Hv + h) * kChunk + j) =
            __floats2bfloat162_rn(a0, a1);
    }
    if (threadIdx.x < n) {
        const int t = threadIdx.x;
        const float last = m.G[n - 1], eg = __expf(m.G[t]);
        w.scal[(ch.r0 + t) * a.Hv + h] = make_float4(
            eg * m.kinv[t], __expf(last - m.G[t]) * m.kinv[t], eg * m.qinv[t], __expf(last));
    }
    __syncthreads();
}

// T = (I + M)^-1 by forward substitution: thread (col, p) = (tid / 4, tid % 4) keeps
// x[q] = T[4q + p][col]; row t's sum over j < t is split over the four lanes (j = 4q + p) and
// combined by shuffles. Unrolled over t so x stays in registers. Leaves T in m.M as
// [kChunk][kF32Row].
__device__ void invert_unit_lower(const PrepSmem& m) {
    const int col = threadIdx.x >> 2, p = threadIdx.x & 3;
    float x[kChunk / 4];
#pragma unroll
    for (int q = 0; q < kChunk / 4; ++q) x[q] = 0.0f;
#pragma unroll
    for (int t = 0; t < kChunk; ++t) {
        const float* row = m.M + t * kMRow + p * kMGroup;
        float s0 = 0.0f, s1 = 0.0f;
        // j = 4q + p < t needs q < ceil(t / 4); float4 groups of q: ceil(t / 16). Entries with
        // j >= t are zero in M (and not yet set in x).
#pragma unroll
        for (int v = 0; v < (t + 15) / 16; ++v) {
            const float4 mv = *reinterpret_cast<const float4*>(row + 4 * v);
            s0 = fmaf(mv.x, x[4 * v], s0);
            s1 = fmaf(mv.y, x[4 * v + 1], s1);
            s0 = fmaf(mv.z, x[4 * v + 2], s0);
            s1 = fmaf(mv.w, x[4 * v + 3], s1);
        }
        float sum = s0 + s1;
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float xt = (t == col ? 1.0f : 0.0f) - sum;
        if (p == (t & 3)) x[t >> 2] = xt;
    }
    __syncthreads(); // everyone is done reading M
#pragma unroll
    for (int q = 0; q < kChunk / 4; ++q) m.M[(4 * q + p) * kF32Row + col] = x[q];
    __syncthreads();
}

// Rows t < n of Tb = T diag(beta), as three bf16 terms, to the workspace: one item per
// (row, 8 columns), three 16-byte stores.
__device__ void store_tb(const GdnArgs& a, const TcWork& w, int h, Rows ch, const PrepSmem& m) {
    for (int e = threadIdx.x; e < ch.n * (kChunk / 8); e += kThreads) {
        const int t = e / (kChunk / 8), j0 = 8 * (e % (kChunk / 8));
        uint32_t pk[4][kPieces];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const int j = j0 + 2 * x;
            split_bf16x2<kPieces>(m.M[t * kF32Row + j] * m.beta[j],
                                  m.M[t * kF32Row + j + 1] * m.beta[j + 1], pk[x]);
        }
        __nv_bfloat16* dst = w.Tb + ((ch.r0 + t) * a.Hv + h) * kPieces * kChunk + j0;
#pragma unroll
        for (int i = 0; i < kPieces; ++i)
            *reinterpret_cast<uint4*>(dst + i * kChunk) =
                make_uint4(pk[0][i], pk[1][i], pk[2][i], pk[3][i]);
    }
    __syncthreads(); // T's buffer is M's for the next value head
}

__global__ void __launch_bounds__(kThreads, 2)
    tc_prepare_kernel(GdnArgs a, TcWork w, int max_chunks) {
    const int s = blockIdx.x / max_chunks, c = blockIdx.x % max_chunks, hk = blockIdx.y;
    const Rows ch = chunk_rows(a, s, c);
    if (ch.n == 0) return;
    extern __shared__ __align__(16) unsigned char smem[];
    const PrepSmem m = prep_layout(smem);
    load_rows(a, hk, ch, m);
    key_products(a.dk, m);
    for (int h = hk * a.ratio; h < (hk + 1) * a.ratio; ++h) {
        load_gates(a, h, ch, m);
        decay_products(a, w, h, ch, m);
        invert_unit_lower(m);
        store_tb(a, w, h, ch, m);
    }
}

} // namespace

size_t gdn_tc_prepare_smem_bytes() {
    return kSmemBytes;
}

void gdn_tc_prepare(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w, int num_seqs,
                    int max_chunks) {
    // Over 48 KiB of shared memory needs the opt-in, per device: set at every launch.
    opt_in_shared_memory(ctx, tc_prepare_kernel, kSmemBytes, "tc_prepare_kernel");
    tc_prepare_kernel<<<dim3(unsigned(num_seqs * max_chunks), unsigned(a.Hv / a.ratio)), kThreads,
                        kSmemBytes, stream_of(ctx)>>>(a, w, max_chunks);
    check_launch("tc_prepare_kernel");
}

} // namespace ninfer::ops::cuda
