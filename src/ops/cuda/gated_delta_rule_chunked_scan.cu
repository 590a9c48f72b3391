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

#include "ops/cuda/gated_delta_rule_chunked_scan.cuh"

namespace ninfer::ops::cuda {
namespace {
using namespace gdn_scan;

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
    state_io(state, a.dk, a.dv, wc, 0, sT, false);
    load_stage<kBlockCols>(a, w, h, cb, ch, buffer_of<kBlockCols>(smem, 0));
    for (int c = 0;; ++c) {
        const Rows next = next_chunk_in<kBlockCols>(a, w, s, h, cb, c, smem);
        const Stage cur = buffer_of<kBlockCols>(smem, c);
        if (wc < a.dv) {
            float r[kTTiles][4], u[kTTiles][4];
            float o[4][2][4];
            residual_partial(cur, a.dk, 0, sT, r);
            residual_finish(cur, wl, r);
            solve_u(cur, r, u);
            qs_partial(cur, a.dk, 0, sT, o);
            out_finish(a, cur, h, wc, ch, u, o);
            update_state(cur, a.dk, 0, u, sT);
        }
        __syncthreads(); // everyone is done with this buffer before it is refilled
        if (next.n == 0) break;
        ch = next;
    }
    state_io(state, a.dk, a.dv, wc, 0, sT, true);
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
    if (const int split = warps == 4 ? gdn_tc_scan_split_dk(ctx) : 0) {
        gdn_tc_scan_split(ctx, a, w, num_seqs, split == 2);
        return;
    }
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
