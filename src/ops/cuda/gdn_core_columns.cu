// The fused GDN decode on column blocks (gdn_decode::launch_columns; NINFER_GDN_CORE_COLUMNS=1,
// gdn_core.cu's dispatch): the contract and arithmetic of gdn_core.cu's kernel, on 4 warps.
// One block per (sequence, value head), a cluster per key head, as there. The head's state
// (kD rows x kD columns, contiguous) is copied to shared memory with cp.async first, so its HBM
// round trip overlaps the conv, the gates and the l2 norms; then thread `col` walks the rows of
// its column twice: S^T k, then the update (its stores straight to HBM) and S^T q. A block holds
// 128 threads and 32 KiB (bf16 state) or 64 KiB (f32): six or three blocks an SM, so one
// block's copy overlaps another's arithmetic, where gdn_core.cu's 512-thread blocks fit one an SM
// and run their phases one after another (1.26 TB/s of a batch-256 step's state on an H100).
// Sums run in gdn_core.cu's order (rows in groups of 32, each from zero, the groups added in
// order), with the same rounding points.
#include <type_traits>

#include "ops/cuda/gdn_core.cuh"
#include "ops/cuda/mma.cuh"

namespace ninfer::ops::cuda::gdn_decode {
namespace {

constexpr int kColThreads = kD; // a thread per state column; warp w holds columns 32 w + lane
// Blocks an SM the kernel is built for: six 32 KiB bf16 state tiles fit an SM's shared memory
// (three f32 ones), so registers (<= 80 a thread) must not be what bounds it.
constexpr int kColMinBlocks = 6;
// Rows a thread's loops keep in flight: full unrolling hoists all 128 tile loads into registers.
constexpr int kRowUnroll = 8;

template <bool kBf16State> using StateElem = std::conditional_t<kBf16State, __nv_bfloat16, float>;

template <bool kBf16State> constexpr size_t state_tile_bytes() {
    return size_t(kD) * kD * sizeof(StateElem<kBf16State>);
}

// Issues the copy of the head's state tile [kD][kD] (contiguous, 16-byte aligned) to `tile`.
template <bool kBf16State>
__device__ void copy_state_tile(const StateElem<kBf16State>* src, unsigned char* tile) {
    constexpr int kChunks = int(state_tile_bytes<kBf16State>() / 16);
    const auto* from = reinterpret_cast<const unsigned char*>(src);
    for (int i = threadIdx.x; i < kChunks; i += kColThreads)
        cp_async_16(tile + 16 * i, from + 16 * i, true);
    cp_async_commit();
}

template <typename T, bool kBf16State, bool kEarly>
__global__ void __launch_bounds__(kColThreads, kColMinBlocks)
    gdn_core_columns_kernel(DecodeArgs a) {
    using E = StateElem<kBf16State>;
    trap_before_sm90();
    const int s = blockIdx.x / a.Hv, h = blockIdx.x % a.Hv, hk = h / a.ratio;
    const int t = threadIdx.x, col = t, warp = t >> 5;
    extern __shared__ __align__(16) unsigned char tile[]; // E [kD][kD]: the head's state
    const E* S_s = reinterpret_cast<const E*>(tile);
    __shared__ float x_s[kChannels]; // conv outputs in T: q [0, kD), k [kD, 2 kD), v [2 kD, 3 kD)
    __shared__ float k_hat[kD], q_hat[kD];
    // Thread t's conv channels: q and k row t of its key head, v column t of its value head.
    int64_t ch[3];
    float taps[3][kConvK];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        ch[c] = conv_channel(t + c * kD, hk, h, a.Hv / a.ratio);
#pragma unroll
        for (int j = 0; j < kConvK; ++j) // weights only before the wait: no kernel writes them
            taps[c][j] = to_float(static_cast<const T*>(a.conv_w)[ch[c] * kConvK + j]);
    }
    const float A_log = to_float(static_cast<const T*>(a.A_log)[h]);
    const float dt_bias = to_float(static_cast<const T*>(a.dt_bias)[h]);
    const float norm_w = to_float(static_cast<const T*>(a.norm_w)[col]);
    // state[slot, h]: [kD][kD]. kEarly: copied before the wait (gdn_core.cu says why it may be).
    const auto state_of = [&](int64_t slot) {
        return static_cast<E*>(a.state.data) + (slot * a.Hv + h) * kD * kD;
    };
    int64_t r, slot;
    if constexpr (kEarly) {
        r = a.row_begin[s], slot = a.slots[s];
        const bool has_row = a.row_begin[s + 1] != r;
        if (has_row) copy_state_tile<kBf16State>(state_of(slot), tile);
        pdl_wait_and_release();
        if (!has_row) return; // no row: both states stay (the whole cluster returns)
    } else {
        pdl_wait_and_release();
        r = a.row_begin[s], slot = a.slots[s];
        if (a.row_begin[s + 1] == r) return;
        copy_state_tile<kBf16State>(state_of(slot), tile);
    }
    float next[3][kHist] = {}; // the q/k channels' next conv state (the v one is written now)
#pragma unroll
    for (int c = 0; c < 3; ++c) conv_block<T>(a, r, slot, t + c * kD, ch[c], taps[c], x_s, next[c]);
    cluster_arrive(); // this block has read its q/k conv state
    __syncthreads();
    const Gates gt =
        gdn_gates_of<T>(to_float(static_cast<const T*>(a.a)[r * a.a_s0 + h]),
                        to_float(static_cast<const T*>(a.b)[r * a.b_s0 + h]), A_log, dt_bias);
    k_hat[t] = normalized_element(x_s + kD, warp, 1.0f); // element 32 warp + lane = t
    q_hat[t] = normalized_element(x_s, warp, rsqrtf(float(kD)));
    cp_async_wait<0>();
    __syncthreads(); // the tile and k^, q^ are in
    float kv = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        float part = 0.0f;
#pragma unroll kRowUnroll
        for (int j = 0; j < 32; ++j) {
            const int i = 32 * g + j;
            part += to_float(S_s[i * kD + col]) * k_hat[i];
        }
        kv += part;
    }
    const float u =
        gt.beta * (x_s[2 * kD + col] - gt.decay * kv); // the delta uses the decayed state
    E* S = state_of(slot);
    float o = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        float part = 0.0f;
#pragma unroll kRowUnroll
        for (int j = 0; j < 32; ++j) {
            const int i = 32 * g + j;
            const float v = gt.decay * to_float(S_s[i * kD + col]) + k_hat[i] * u;
            S[i * kD + col] = from_float<E>(v);
            part += v * q_hat[i]; // read after the update
        }
        o += part;
    }
    gated_norm_store<T>(a, r, h, col, o, norm_w);
    if (h % a.ratio != 0) return;
    cluster_wait(); // every block of the cluster has read the q/k conv state
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        T* hist = static_cast<T*>(a.conv_state) + (slot * a.C + ch[c]) * kHist;
#pragma unroll
        for (int j = 0; j < kHist; ++j) hist[j] = from_float<T>(next[c][j]);
    }
}

template <typename T, bool kBf16State>
void launch_state(const ExecContext& ctx, const DecodeArgs& a, int seqs, bool early) {
    void (*kernel)(DecodeArgs) = early ? gdn_core_columns_kernel<T, kBf16State, true>
                                       : gdn_core_columns_kernel<T, kBf16State, false>;
    constexpr size_t smem = state_tile_bytes<kBf16State>();
    opt_in_shared_memory(ctx, kernel, smem, "gdn_core_columns_kernel");
    launch_clustered(ctx, kernel, a, seqs, kColThreads, smem, "gdn_core_columns_kernel");
}

} // namespace

template <typename T>
void launch_columns(const ExecContext& ctx, const DecodeArgs& a, int seqs, bool early) {
    if (a.state.bf16)
        launch_state<T, true>(ctx, a, seqs, early);
    else
        launch_state<T, false>(ctx, a, seqs, early);
}

template void launch_columns<float>(const ExecContext&, const DecodeArgs&, int, bool);
template void launch_columns<__nv_bfloat16>(const ExecContext&, const DecodeArgs&, int, bool);

} // namespace ninfer::ops::cuda::gdn_decode
