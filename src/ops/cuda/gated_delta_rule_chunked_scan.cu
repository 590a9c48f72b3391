// The tensor-core chunked gated delta rule, pass 2 (formulas in gated_delta_rule_chunked_tc.cuh).
// tc_scan_kernel<W>: one block per (sequence, value head, 16 W state columns), chunks in order,
//   the next chunk's tiles (Kr, Qr, V, Tb, A, scalars: 80 or 88 KiB) loading by cp.async while
//   this one computes. W = 4 (64 columns) or 8 (all 128; gdn_tc_scan_warps says when). Each of
//   the W warps owns 16 state columns and keeps S^T (16 x 128, f32) in mma accumulator
//   registers for the whole sequence; every product of a chunk is a bf16 m16n8k16
//   mma whose fragments come from those registers or from ldmatrix:
//     X^T = S^T Kr^T          R^T = V^T - X^T diag(e^G kinv)         U^T = R^T Tb^T
//     out = diag(e^G qinv) Qr S + A U        S^T = e^{G_last} S^T + U^T diag(e^{G_last-G} kinv) Kr
//   An accumulator tile doubles as the next product's A fragment (rows = the warp's columns),
//   so nothing of S or U passes through shared memory. The value columns are independent: warps
//   and blocks never communicate beyond the shared read-only tiles.
#include <cstdlib>
#include <cstring>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gated_delta_rule_chunked_tc.cuh"

namespace ninfer::ops::cuda {
namespace {
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

// R^T (16 x 64, accumulator tiles over t) = V^T - (S^T Kr^T) diag(e^G kinv); S^T in 3 terms.
__device__ __forceinline__ void residual(const Stage& st, int dk, int wl,
                                         const float (&sT)[kSTiles][4], float (&r)[kTTiles][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kTTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) r[nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kDk / 16; ++ks) {
        if (16 * ks >= dk) break;
        uint32_t a[kPieces][4];
        a_from_acc<kPieces>(sT[2 * ks], sT[2 * ks + 1], a);
#pragma unroll
        for (int tp = 0; tp < kChunk / 16; ++tp) { // B = Kr^T: rows t of Kr, k = i
            uint32_t b[4];
            ldmatrix_x4(b, st.K + (16 * tp + (lane & 7) + (lane >> 4) * 8) * kKRow + 16 * ks +
                               ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int i = 0; i < kPieces; ++i) {
                mma_bf16_16816(r[2 * tp], a[i], b0);
                mma_bf16_16816(r[2 * tp + 1], a[i], b1);
            }
        }
    }
    // Element e of tile nt: column wl + lane/4 (+8 for e >= 2), row t = 8 nt + 2 (lane%4) + e%2.
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

// out rows t < n, the warp's columns [wc, wc + 16): diag(e^G qinv) Qr S + A U (o tiles: 4 row
// tiles x 2 column tiles), S and U in two bf16 terms.
__device__ __forceinline__ void chunk_out(const GdnArgs& a, const Stage& st, int h, int wc, Rows ch,
                                          const float (&sT)[kSTiles][4],
                                          const float (&u)[kTTiles][4]) {
    const int lane = threadIdx.x & 31;
    float o[4][2][4] = {};
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
#pragma unroll
    for (int ks = 0; ks < kDk / 16; ++ks) {
        if (16 * ks >= a.dk) break;
        uint32_t b[2][2][2];
        b_from_acc(sT[2 * ks], sT[2 * ks + 1], b);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
            uint32_t qa[4];
            ldmatrix_x4(qa, st.Q + (16 * mt + a_row) * kKRow + 16 * ks + a_col);
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int i = 0; i < 2; ++i) mma_bf16_16816(o[mt][j], qa, b[j][i]);
        }
    }
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

// S^T = e^{G_last} S^T + U^T diag(e^{G_last - G} kinv) Kr; the scaled U^T in three terms.
__device__ __forceinline__ void update_state(const Stage& st, int dk, const float (&u)[kTTiles][4],
                                             float (&sT)[kSTiles][4]) {
    const int lane = threadIdx.x & 31;
    const float fade = st.scal[0].w;
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt)
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
        for (int ip = 0; ip < kDk / 16; ++ip) { // B = Kr: k = t, n = i (transposed loads)
            if (16 * ip >= dk) break;
            uint32_t b[4];
            ldmatrix_x4_trans(b, st.K + (16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * kKRow +
                                     16 * ip + (lane >> 4) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int i = 0; i < kPieces; ++i) {
                mma_bf16_16816(sT[2 * ip], a[i], b0);
                mma_bf16_16816(sT[2 * ip + 1], a[i], b1);
            }
        }
    }
}

// S^T tile element e of tile nt: state row i = 8 nt + 2 (lane%4) + e%2, column
// wc + lane/4 (+8 for e >= 2). Loads (store = false) or stores the warp's slice.
__device__ __forceinline__ void state_io(const GdnStateRef& state, int dk, int dv, int wc,
                                         float (&sT)[kSTiles][4], bool store) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = 8 * nt + 2 * (lane & 3) + (e & 1), col = wc + (lane >> 2) + (e >> 1) * 8;
            const bool in = i < dk && col < dv;
            if (store) {
                if (in) state.store(int64_t(i) * dv + col, sT[nt][e]);
            } else {
                sT[nt][e] = in ? state.load(int64_t(i) * dv + col) : 0.0f;
            }
        }
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 1) tc_scan_kernel(GdnArgs a, TcWork w) {
    constexpr int kBlockCols = kWarps * kWarpCols;
    const int s = blockIdx.x, h = blockIdx.y, cb = blockIdx.z * kBlockCols;
    const int wl = (threadIdx.x >> 5) * kWarpCols, wc = cb + wl;
    Rows ch = chunk_rows(a, s, 0);
    if (ch.n == 0) return; // an empty sequence keeps its state
    extern __shared__ __align__(16) unsigned char smem[];
    const GdnStateRef state =
        GdnStateRef{a.state, a.state_bf16}.at((int64_t(a.slots[s]) * a.Hv + h) * a.dk * a.dv);
    float sT[kSTiles][4];
    state_io(state, a.dk, a.dv, wc, sT, false);
    // Chunk c's tiles are in buffer c % 2 (computed, not indexed: an array of Stage would live
    // on the stack).
    const auto buffer = [&](int c) {
        return stage_layout<kBlockCols>(smem + (c & 1) * kStageBytes<kBlockCols>);
    };
    load_stage<kBlockCols>(a, w, h, cb, ch, buffer(0));
    for (int c = 0;; ++c) {
        const Rows next = chunk_rows(a, s, c + 1);
        if (next.n > 0) {
            load_stage<kBlockCols>(a, w, h, cb, next, buffer(c + 1));
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // chunk c's tiles are in
        const Stage cur = buffer(c);
        if (wc < a.dv) {
            float r[kTTiles][4], u[kTTiles][4];
            residual(cur, a.dk, wl, sT, r);
            solve_u(cur, r, u);
            chunk_out(a, cur, h, wc, ch, sT, u);
            update_state(cur, a.dk, u, sT);
        }
        __syncthreads(); // everyone is done with this buffer before it is refilled
        if (next.n == 0) break;
        ch = next;
    }
    state_io(state, a.dk, a.dv, wc, sT, true);
}

} // namespace

size_t gdn_tc_scan_smem_bytes(int warps) {
    // double-buffered chunk tiles: 160 KiB at 4 warps, 176 KiB at 8
    return 2 * (warps == 8 ? kStageBytes<8 * kWarpCols> : kStageBytes<4 * kWarpCols>);
}

int gdn_tc_scan_warps(const ExecContext& ctx, int num_seqs, int Hv) {
    // 8 warps (a block per head, 128 columns) when the heads of the batch alone fill every SM
    // twice: each chunk's shared tiles (Kr, Qr, Tb, A) are then loaded once per head instead of
    // twice, and an SM runs 8 warps instead of 4 (one block fits an SM either way). Fewer heads
    // (one long prompt: 32 of them) keep 4 warps and twice the blocks, as do devices without
    // the 176 KiB (sm_80's 163 KiB).
    // NINFER_GDN_SCAN_WIDE=0 (read at every call) keeps 4 warps everywhere: an A/B switch.
    // Measured on the H100: 64 x 1,024 rows 6.66 -> 4.64 ms, the fp8 35B's 65,536-row prefill
    // step +4.9%.
    const char* env = std::getenv("NINFER_GDN_SCAN_WIDE");
    const bool opted = env == nullptr || std::strcmp(env, "0") != 0;
    const bool many = int64_t(num_seqs) * Hv >= 2 * int64_t(sm_count(ctx));
    return opted && many && shared_memory_fits(ctx.device.index, gdn_tc_scan_smem_bytes(8)) ? 8 : 4;
}

void gdn_tc_scan(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w, int num_seqs,
                 int warps) {
    const size_t smem = gdn_tc_scan_smem_bytes(warps);
    auto launch = [&](auto kernel, int kernel_warps) {
        opt_in_shared_memory(ctx, kernel, smem, "tc_scan_kernel");
        const int block_cols = kernel_warps * kWarpCols;
        kernel<<<dim3(unsigned(num_seqs), unsigned(a.Hv),
                      unsigned((a.dv + block_cols - 1) / block_cols)),
                 kernel_warps * 32, smem, stream_of(ctx)>>>(a, w);
    };
    if (warps == 8)
        launch(tc_scan_kernel<8>, 8);
    else
        launch(tc_scan_kernel<4>, 4);
    check_launch("tc_scan_kernel");
}

} // namespace ninfer::ops::cuda
