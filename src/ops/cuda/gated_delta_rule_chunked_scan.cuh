// The tensor-core chunked GDN scan's device pieces (pass 2; formulas in
// gated_delta_rule_chunked_tc.cuh), shared by its kernels: tc_scan_kernel
// (gated_delta_rule_chunked_scan.cu) and tc_scan_split_kernel
// (gated_delta_rule_chunked_scan_split.cu). A warp owns 16 state columns; each piece works on
// the state rows [i0, i0 + 8 kTiles) the warp holds (all 128, or half under the split).
// Included by .cu files only.
#pragma once

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gated_delta_rule_chunked_tc.cuh"

namespace ninfer::ops::cuda::gdn_scan {
using namespace gdn_tc;

constexpr int kWarpCols = 16;    // the mma's M: S^T rows (state columns) per warp
constexpr int kSTiles = kDk / 8; // 16x8 accumulator tiles of S^T (over i)
constexpr int kTTiles = kChunk / 8;

struct Stage {            // one chunk's tiles (rows past n and columns past dk / dv are zero)
    __nv_bfloat16 *K, *Q; // [kChunk][kKRow]
    __nv_bfloat16* V;     // [kChunk][v_row]  the block's 16 W value columns
    __nv_bfloat16* Tb;    // [kPieces][kChunk][kTRow]
    __nv_bfloat16* A;     // [kChunk][kTRow]
    float4* scal;         // [kChunk]
    int v_row;            // V's row stride: its columns + kPad
};
// A stage's bytes for a block of kCols value columns (64: 80 KiB, 128: 88 KiB).
template <int kCols>
constexpr size_t kStageBytes = sizeof(__nv_bfloat16) *
                                   (2 * kChunk * kKRow + kChunk * (kCols + kPad) +
                                    (1 + kPieces) * kChunk * kTRow) +
                               sizeof(float4) * kChunk;

template <int kCols> __device__ Stage stage_layout(unsigned char* p) {
    Stage st;
    st.v_row = kCols + kPad;
    st.K = reinterpret_cast<__nv_bfloat16*>(p);
    st.Q = st.K + kChunk * kKRow;
    st.V = st.Q + kChunk * kKRow;
    st.Tb = st.V + kChunk * st.v_row;
    st.A = st.Tb + kPieces * kChunk * kTRow;
    st.scal = reinterpret_cast<float4*>(st.A + kChunk * kTRow);
    return st;
}

// Issues the copies of chunk `ch`'s tiles for value head h, value columns [cb, cb + kCols).
template <int kCols>
__device__ void load_stage(const GdnArgs& a, const TcWork& w, int h, int cb, Rows ch,
                           const Stage& st) {
    const int hk = h / a.ratio, n = ch.n;
    const int64_t r0 = ch.r0;
    const auto* kb = static_cast<const __nv_bfloat16*>(a.k);
    const auto* qb = static_cast<const __nv_bfloat16*>(a.q);
    const auto* vb = static_cast<const __nv_bfloat16*>(a.v);
    const auto key_ok = [&](int t, int sg) { return t < n && sg * 8 < a.dk; };
    const auto row_ok = [&](int t, int) { return t < n; };
    copy_tile(
        st.K, kKRow, kChunk, kDk / 8, kb,
        [&](int t, int sg) { return kb + (r0 + t) * a.k_s0 + hk * a.k_s1 + sg * 8; }, key_ok);
    copy_tile(
        st.Q, kKRow, kChunk, kDk / 8, qb,
        [&](int t, int sg) { return qb + (r0 + t) * a.q_s0 + hk * a.q_s1 + sg * 8; }, key_ok);
    copy_tile(
        st.V, st.v_row, kChunk, kCols / 8, vb,
        [&](int t, int sg) { return vb + (r0 + t) * a.v_s0 + h * a.v_s1 + cb + sg * 8; },
        [&](int t, int sg) { return t < n && cb + sg * 8 < a.dv; });
    // Tb's rows e = piece * kChunk + t.
    copy_tile(
        st.Tb, kTRow, kPieces * kChunk, kChunk / 8, w.Tb,
        [&](int e, int sg) {
            return w.Tb + (((r0 + e % kChunk) * a.Hv + h) * kPieces + e / kChunk) * kChunk + sg * 8;
        },
        [&](int e, int) { return e % kChunk < n; });
    copy_tile(
        st.A, kTRow, kChunk, kChunk / 8, w.A,
        [&](int t, int sg) { return w.A + ((r0 + t) * a.Hv + h) * kChunk + sg * 8; }, row_ok);
    copy_tile(
        st.scal, 8, kChunk, 1, w.scal, [&](int t, int) { return w.scal + (r0 + t) * a.Hv + h; },
        row_ok);
    cp_async_commit();
}

// Chunk c's tiles: buffer c % 2 of the dynamic shared memory (computed, not indexed: an array of
// Stage would live on the stack).
template <int kCols> __device__ __forceinline__ Stage buffer_of(unsigned char* smem, int c) {
    return stage_layout<kCols>(smem + (c & 1) * kStageBytes<kCols>);
}

// Issues chunk c + 1's copies (when it has rows), then waits, block-wide, for chunk c's tiles;
// returns chunk c + 1's rows. Chunk 0's copies are issued before the loop.
template <int kCols>
__device__ __forceinline__ Rows next_chunk_in(const GdnArgs& a, const TcWork& w, int s, int h,
                                              int cb, int c, unsigned char* smem) {
    const Rows next = chunk_rows(a, s, c + 1);
    if (next.n > 0) {
        load_stage<kCols>(a, w, h, cb, next, buffer_of<kCols>(smem, c + 1));
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncthreads(); // chunk c's tiles are in
    return next;
}

// X^T (16 x 64, accumulator tiles over t) = S^T Kr^T over the state rows [i0, i0 + 8 kTiles)
// the warp holds (sT's tile nt is rows i0 + 8 nt ..); S^T in 3 terms.
template <int kTiles>
__device__ __forceinline__ void residual_partial(const Stage& st, int dk, int i0,
                                                 const float (&sT)[kTiles][4],
                                                 float (&r)[kTTiles][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kTTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) r[nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kTiles / 2; ++ks) {
        const int i = i0 + 16 * ks;
        if (i >= dk) break;
        uint32_t a[kPieces][4];
        a_from_acc<kPieces>(sT[2 * ks], sT[2 * ks + 1], a);
#pragma unroll
        for (int tp = 0; tp < kChunk / 16; ++tp) { // B = Kr^T: rows t of Kr, k = i
            uint32_t b[4];
            ldmatrix_x4(b, st.K + (16 * tp + (lane & 7) + (lane >> 4) * 8) * kKRow + i +
                               ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int q = 0; q < kPieces; ++q) {
                mma_bf16_16816(r[2 * tp], a[q], b0);
                mma_bf16_16816(r[2 * tp + 1], a[q], b1);
            }
        }
    }
}

// R^T = V^T - X^T diag(e^G kinv), in place. Element e of tile nt: column wl + lane/4 (+8 for
// e >= 2), row t = 8 nt + 2 (lane%4) + e%2.
__device__ __forceinline__ void residual_finish(const Stage& st, int wl, float (&r)[kTTiles][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kTTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int t = 8 * nt + 2 * (lane & 3) + (e & 1), col = wl + (lane >> 2) + (e >> 1) * 8;
            r[nt][e] = __bfloat162float(st.V[t * st.v_row + col]) - st.scal[t].x * r[nt][e];
        }
}

// U^T = R^T Tb^T (Tb lower triangular: t-tiles before the k-tile are skipped). Both operands are
// f32 split in three terms; the products of total order 2^-24 and below are left out.
__device__ __forceinline__ void solve_u(const Stage& st, const float (&r)[kTTiles][4],
                                        float (&u)[kTTiles][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kTTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) u[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk) {
        uint32_t a[kPieces][4];
        a_from_acc<kPieces>(r[2 * kk], r[2 * kk + 1], a);
#pragma unroll
        for (int tp = kk; tp < kChunk / 16; ++tp)
#pragma unroll
            for (int q = 0; q < kPieces; ++q) { // B = Tb^T: rows t of Tb term q, k = t'
                uint32_t b[4];
                ldmatrix_x4(b, st.Tb +
                                   (q * kChunk + 16 * tp + (lane & 7) + (lane >> 4) * 8) * kTRow +
                                   16 * kk + ((lane >> 3) & 1) * 8);
                const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
                for (int i = 0; i + q < kPieces; ++i) {
                    mma_bf16_16816(u[2 * tp], a[i], b0);
                    mma_bf16_16816(u[2 * tp + 1], a[i], b1);
                }
            }
    }
}

// B fragments (k 16, n 8 + 8) from two accumulator tiles lo (k 0..7) and hi (k 8..15) whose rows
// are the n index: b[j][i] is term i of n-tile j (tile rows 8j..8j+7).
__device__ __forceinline__ void b_from_acc(const float (&lo)[4], const float (&hi)[4],
                                           uint32_t (&b)[2][2][2]) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        uint32_t p0[2], p1[2];
        split_bf16x2<2>(lo[2 * j], lo[2 * j + 1], p0);
        split_bf16x2<2>(hi[2 * j], hi[2 * j + 1], p1);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            b[j][i][0] = p0[i];
            b[j][i][1] = p1[i];
        }
    }
}

// o (4 row tiles x 2 column tiles) = Qr S over the state rows [i0, i0 + 8 kTiles) the warp
// holds, S in two bf16 terms.
template <int kTiles>
__device__ __forceinline__ void qs_partial(const Stage& st, int dk, int i0,
                                           const float (&sT)[kTiles][4], float (&o)[4][2][4]) {
    const int lane = threadIdx.x & 31;
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][j][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kTiles / 2; ++ks) {
        const int i = i0 + 16 * ks;
        if (i >= dk) break;
        uint32_t b[2][2][2];
        b_from_acc(sT[2 * ks], sT[2 * ks + 1], b);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
            uint32_t qa[4];
            ldmatrix_x4(qa, st.Q + (16 * mt + a_row) * kKRow + i + a_col);
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int q = 0; q < 2; ++q) mma_bf16_16816(o[mt][j], qa, b[j][q]);
        }
    }
}

// out rows t < n, the warp's columns [wc, wc + 16): diag(e^G qinv) (Qr S, in o) + A U, U in
// two bf16 terms.
__device__ __forceinline__ void out_finish(const GdnArgs& a, const Stage& st, int h, int wc,
                                           Rows ch, const float (&u)[kTTiles][4],
                                           float (&o)[4][2][4]) {
    const int lane = threadIdx.x & 31;
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        const float s0 = st.scal[16 * mt + (lane >> 2)].z,
                    s1 = st.scal[16 * mt + (lane >> 2) + 8].z;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            o[mt][j][0] *= s0;
            o[mt][j][1] *= s0;
            o[mt][j][2] *= s1;
            o[mt][j][3] *= s1;
        }
    }
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk) { // A lower triangular: row tiles mt >= kk
        uint32_t b[2][2][2];
        b_from_acc(u[2 * kk], u[2 * kk + 1], b);
#pragma unroll
        for (int mt = kk; mt < 4; ++mt) {
            uint32_t aa[4];
            ldmatrix_x4(aa, st.A + (16 * mt + a_row) * kTRow + 16 * kk + a_col);
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int i = 0; i < 2; ++i) mma_bf16_16816(o[mt][j], aa, b[j][i]);
        }
    }
    auto* out = static_cast<__nv_bfloat16*>(a.out);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int t = 16 * mt + (lane >> 2) + 8 * half;
            if (t >= ch.n) continue;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int col = wc + 8 * j + 2 * (lane & 3);
                if (col < a.dv)
                    *reinterpret_cast<__nv_bfloat162*>(out + ((ch.r0 + t) * a.Hv + h) * a.dv +
                                                       col) =
                        __floats2bfloat162_rn(o[mt][j][2 * half], o[mt][j][2 * half + 1]);
            }
        }
}

// S^T = e^{G_last} S^T + U^T diag(e^{G_last - G} kinv) Kr over the state rows [i0, i0 + 8
// kTiles) the warp holds; the scaled U^T in three terms.
template <int kTiles>
__device__ __forceinline__ void update_state(const Stage& st, int dk, int i0,
                                             const float (&u)[kTTiles][4], float (&sT)[kTiles][4]) {
    const int lane = threadIdx.x & 31;
    const float fade = st.scal[0].w;
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) sT[nt][e] *= fade;
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk) {
        float lo[4], hi[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int t = 16 * kk + 2 * (lane & 3) + (e & 1);
            lo[e] = u[2 * kk][e] * st.scal[t].y;
            hi[e] = u[2 * kk + 1][e] * st.scal[t + 8].y;
        }
        uint32_t a[kPieces][4];
        a_from_acc<kPieces>(lo, hi, a);
#pragma unroll
        for (int ip = 0; ip < kTiles / 2; ++ip) { // B = Kr: k = t, n = i (transposed loads)
            const int i = i0 + 16 * ip;
            if (i >= dk) break;
            uint32_t b[4];
            ldmatrix_x4_trans(b, st.K + (16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * kKRow + i +
                                     (lane >> 4) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int q = 0; q < kPieces; ++q) {
                mma_bf16_16816(sT[2 * ip], a[q], b0);
                mma_bf16_16816(sT[2 * ip + 1], a[q], b1);
            }
        }
    }
}

// S^T tile element e of tile nt: state row i = i0 + 8 nt + 2 (lane%4) + e%2, column
// wc + lane/4 (+8 for e >= 2). Loads (store = false) or stores the warp's slice.
template <int kTiles>
__device__ __forceinline__ void state_io(const GdnStateRef& state, int dk, int dv, int wc, int i0,
                                         float (&sT)[kTiles][4], bool store) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = i0 + 8 * nt + 2 * (lane & 3) + (e & 1);
            const int col = wc + (lane >> 2) + (e >> 1) * 8;
            const bool in = i < dk && col < dv;
            if (store) {
                if (in) state.store(int64_t(i) * dv + col, sT[nt][e]);
            } else {
                sT[nt][e] = in ? state.load(int64_t(i) * dv + col) : 0.0f;
            }
        }
}

} // namespace ninfer::ops::cuda::gdn_scan
