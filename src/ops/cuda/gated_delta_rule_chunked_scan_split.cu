// The chunked GDN scan on dk-split blocks (NINFER_GDN_SCAN_SPLIT_DK=0 turns them off; the pieces
// in gated_delta_rule_chunked_scan.cuh, the other blocks in gated_delta_rule_chunked_scan.cu).
#include <cstdlib>
#include <cstring>

#include "ops/cuda/gated_delta_rule_chunked_scan.cuh"

namespace ninfer::ops::cuda {
namespace {
using namespace gdn_scan;

// The dk-split scan (taken where the 4-warp blocks would run, on devices that give a block its
// shared memory). With few sequences (one long prompt: 64 blocks of 4 warps on 132 SMs) each warp
// is alone on its SM sub-partition, and its chain of dependent mmas, ldmatrix and splits leaves the
// tensor pipe mostly idle. Here 8 warps share 64 state columns: warp w owns columns
// 16 (w % 4) .. + 16 and the state rows i of its half, [64 (w / 4), 64 (w / 4) + 64), so every
// sub-partition has two warps and each warp's chain is shorter:
//   X^T = S^T Kr^T   halves' partials summed through shared memory (pair barrier): R alike in both
//   U^T = R^T Tb^T   both warps, the same bits (the sum is commutative)
//   out              each half's Qr S partial; the upper half hands its over, the lower adds it,
//                    A U and stores
//   S^T update       each warp its own rows
constexpr int kSplitWarps = 8;
constexpr int kSplitCols = 4 * kWarpCols; // state columns a block
constexpr int kHalfTiles = kSTiles / 2;   // S^T tiles a warp holds
// After the two stages: per column group, the two halves' X^T partials and the upper half's Qr S
// partial, 32 floats a lane each, stored lane-minor (bank-conflict free).
constexpr int kLaneFloats = 32;
static_assert(kLaneFloats == kTTiles * 4 && kLaneFloats == 4 * 2 * 4,
              "a slot holds a lane's X^T partial (r) or its Qr S partial (o)");
constexpr size_t kSplitExchangeBytes = sizeof(float) * 4 * 3 * kLaneFloats * 32;
// A block's dynamic shared memory: the two stages' 160 KiB and the exchange slots' 48.
constexpr size_t kSplitSmemBytes = 2 * kStageBytes<kSplitCols> + kSplitExchangeBytes;

// Named barriers of one column group's two warps (id 0 is __syncthreads').
__device__ __forceinline__ void pair_sync(int id) {
    asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory");
}
__device__ __forceinline__ void pair_arrive(int id) {
    asm volatile("bar.arrive %0, 64;" ::"r"(id) : "memory");
}
// The lane's 32 floats of v to buf (lane-minor), or added from it.
__device__ __forceinline__ void put_lane(float* buf, const float* v) {
#pragma unroll
    for (int f = 0; f < kLaneFloats; ++f) buf[f * 32 + (threadIdx.x & 31)] = v[f];
}
__device__ __forceinline__ void add_lane(const float* buf, float* v) {
#pragma unroll
    for (int f = 0; f < kLaneFloats; ++f) v[f] += buf[f * 32 + (threadIdx.x & 31)];
}

// sabotage (the test's arm): the lower half drops the upper half's Qr S partial.
__global__ void __launch_bounds__(kSplitWarps * 32, 1)
    tc_scan_split_kernel(GdnArgs a, TcWork w, int sabotage) {
    const int s = blockIdx.x, h = blockIdx.y, cb = blockIdx.z * kSplitCols;
    const int warp = threadIdx.x >> 5, g = warp & 3, half = warp >> 2;
    const int wl = g * kWarpCols, wc = cb + wl, i0 = half * (kDk / 2);
    Rows ch = chunk_rows(a, s, 0);
    if (ch.n == 0) return; // an empty sequence keeps its state
    extern __shared__ __align__(16) unsigned char smem[];
    float* exchange = reinterpret_cast<float*>(smem + 2 * kStageBytes<kSplitCols>);
    float* x_mine = exchange + (3 * g + half) * kLaneFloats * 32;
    const float* x_other = exchange + (3 * g + 1 - half) * kLaneFloats * 32;
    float* o_upper = exchange + (3 * g + 2) * kLaneFloats * 32;
    const GdnStateRef state =
        GdnStateRef{a.state, a.state_bf16}.at((int64_t(a.slots[s]) * a.Hv + h) * a.dk * a.dv);
    float sT[kHalfTiles][4];
    state_io(state, a.dk, a.dv, wc, i0, sT, false);
    load_stage<kSplitCols>(a, w, h, cb, ch, buffer_of<kSplitCols>(smem, 0));
    for (int c = 0;; ++c) {
        const Rows next = next_chunk_in<kSplitCols>(a, w, s, h, cb, c, smem);
        const Stage cur = buffer_of<kSplitCols>(smem, c);
        if (wc < a.dv) { // both warps of a column group alike
            float r[kTTiles][4], u[kTTiles][4], o[4][2][4];
            residual_partial(cur, a.dk, i0, sT, r);
            put_lane(x_mine, &r[0][0]);
            pair_sync(1 + g);
            add_lane(x_other, &r[0][0]);
            residual_finish(cur, wl, r);
            solve_u(cur, r, u);
            qs_partial(cur, a.dk, i0, sT, o);
            update_state(cur, a.dk, i0, u, sT);
            if (half == 1) {
                put_lane(o_upper, &o[0][0][0]);
                pair_arrive(5 + g);
            } else {
                pair_sync(5 + g);
                if (!sabotage) add_lane(o_upper, &o[0][0][0]);
                out_finish(a, cur, h, wc, ch, u, o);
            }
        }
        // Everyone is done with this buffer before it is refilled, and with the exchange
        // slots before they are written again.
        __syncthreads();
        if (next.n == 0) break;
        ch = next;
    }
    state_io(state, a.dk, a.dv, wc, i0, sT, true);
}

} // namespace

int gdn_tc_scan_split_dk(const ExecContext& ctx) {
    // What would take the 4-warp blocks runs on the dk-split ones, where the device gives a block
    // their 208 KiB (the stages' 160 plus the exchange slots' 48): sm_90 and sm_100. Measured on
    // an H100 (bench_prefill_ops gdn_batch 5, interleaved, two rounds; bench/NOTES.md, nineteenth
    // session): one 8,192-row prompt 1.426 -> 1.250 ms, 8 x 1,024 rows 0.857 -> 0.775 ms.
    // NINFER_GDN_SCAN_SPLIT_DK (read at every call): 0 keeps the 4-warp blocks (an A/B switch);
    // `sabotage` is its test's arm.
    if (!shared_memory_fits(ctx.device.index, kSplitSmemBytes)) return 0;
    const char* env = std::getenv("NINFER_GDN_SCAN_SPLIT_DK");
    if (env == nullptr || *env == 0) return 1;
    if (std::strcmp(env, "0") == 0) return 0;
    return std::strcmp(env, "sabotage") == 0 ? 2 : 1;
}

void gdn_tc_scan_split(const ExecContext& ctx, const GdnArgs& a, const gdn_tc::TcWork& w,
                       int num_seqs, bool sabotage) {
    opt_in_shared_memory(ctx, tc_scan_split_kernel, kSplitSmemBytes, "tc_scan_split_kernel");
    tc_scan_split_kernel<<<dim3(unsigned(num_seqs), unsigned(a.Hv),
                                unsigned((a.dv + kSplitCols - 1) / kSplitCols)),
                           kSplitWarps * 32, kSplitSmemBytes, stream_of(ctx)>>>(a, w,
                                                                                sabotage ? 1 : 0);
    check_launch("tc_scan_split_kernel");
}

} // namespace ninfer::ops::cuda
