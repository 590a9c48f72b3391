// Implements gdn_core (ops/gated_delta_rule.h) on CUDA: the decode route runs a GDN layer's
// conv + SiLU, gates, l2 norms, recurrent update and gated RMS norm in one kernel.
// Chosen when every sequence has at most one row, dk = dv = 128, conv kernel 4 and Hv / Hk <= 8,
// on devices with sm_90's thread-block clusters (has_sm90_features: sm_90 and later, not in
// portable mode); the dispatcher runs the four ops for everything else. The images for older
// architectures trap (trap_before_sm90): their barrier.cluster does not exist.
// Assumes contiguous conv state, recurrent state and core; unit last strides on the in_proj views.
#include <cstdlib>
#include <cstring>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gdn_core.cuh"

namespace ninfer::ops::cuda {
namespace {
using namespace gdn_decode;

constexpr int kThreads = kGroups * kGroups * 32; // one warp per (row group, column group): 512

// One token of the recurrence on this thread's state rows S[32 rg + j, col] (recurrent_kernel's
// arithmetic and summation order): S = decay S + k^ u^T with u = beta (v - decay S^T k^), then
// returns column col of S^T q^ (summed over the row groups). k_mine, q_mine: k^, q^ at row
// 32 rg + lane; v: v[col]. Every thread of the block calls it.
__device__ float delta_rule_step(float (&S)[32], Gates gt, float v, float k_mine, float q_mine,
                                 int rg, int col) {
    __shared__ float part[2][kGroups][kD]; // per row group: S^T k and S^T q partial sums
    float kv = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) kv += S[j] * __shfl_sync(0xffffffffu, k_mine, j);
    part[0][rg][col] = kv;
    __syncthreads();
    kv = 0.0f;
#pragma unroll
    for (int w = 0; w < kGroups; ++w) kv += part[0][w][col];
    const float u = gt.beta * (v - gt.decay * kv); // the delta uses the decayed state
    float o = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        S[j] = gt.decay * S[j] + __shfl_sync(0xffffffffu, k_mine, j) * u;
        o += S[j] * __shfl_sync(0xffffffffu, q_mine, j); // read after the update
    }
    part[1][rg][col] = o;
    __syncthreads();
    o = 0.0f;
#pragma unroll
    for (int w = 0; w < kGroups; ++w) o += part[1][w][col];
    return o;
}

// One block per (sequence, value head h), a cluster per key head (its `ratio` value heads).
// Warp (row group rg, column group) keeps S[32 rg + j, col] (j < 32) in registers, lane = column:
// the recurrent kernel's layout over all kD columns, so the gated norm over dv stays in the block.
// Every block computes its key head's q/k conv (the blocks of a cluster share it); the cluster's
// first block writes that conv state back once every block of the cluster has read it.
// Build variants (gdn_core_variant; A/B switches until measured):
//   kMinBlocks: the blocks an SM must hold at once. 1: up to 128 registers a thread (96 used);
//     2: 64, a few spilled, so that one block's state loads overlap another's arithmetic and
//     stores, where one block alone runs its phases one after another.
//   kEarlyState: the sequence's row, slot and recurrent state are read before the PDL wait, so
//     the state's HBM round trip overlaps the previous kernel's tail. Safe because no kernel
//     that may still be running writes them: the row and slot tables are host copies made
//     before the step's kernels; the state is written only by this layer's GDN kernels, and
//     every kernel of ours runs griddepcontrol.wait before it releases its dependents, so when
//     this grid starts, every kernel before its immediate predecessor (in_proj, which reads
//     activations and writes in_proj's rows) has completed.
template <typename T, int kMinBlocks, bool kEarlyState>
__global__ void __launch_bounds__(kThreads, kMinBlocks) gdn_core_kernel(DecodeArgs a) {
    trap_before_sm90();
    const int s = blockIdx.x / a.Hv, h = blockIdx.x % a.Hv, hk = h / a.ratio;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int col = (warp % kGroups) * 32 + lane, rg = warp / kGroups;
    const int64_t ch = t < kChannels ? conv_channel(t, hk, h, a.Hv / a.ratio) : -1;
    // Weights only before the wait: no kernel of the step writes them.
    float taps[kConvK] = {};
    if (ch >= 0)
#pragma unroll
        for (int j = 0; j < kConvK; ++j)
            taps[j] = to_float(static_cast<const T*>(a.conv_w)[ch * kConvK + j]);
    const float A_log = to_float(static_cast<const T*>(a.A_log)[h]);
    const float dt_bias = to_float(static_cast<const T*>(a.dt_bias)[h]);
    const float norm_w = to_float(static_cast<const T*>(a.norm_w)[col]);
    // No row: both states stay (the whole cluster returns). S[slot, h, 32 rg + j, col]:
    const auto state_of = [&](int64_t slot) {
        return a.state.at(((slot * a.Hv + h) * kD + 32 * rg) * kD + col);
    };
    int64_t r, slot;
    GdnStateRef st;
    float S[32];
    if constexpr (kEarlyState) {
        r = a.row_begin[s], slot = a.slots[s];
        const bool has_row = a.row_begin[s + 1] != r;
        st = state_of(slot);
        if (has_row)
#pragma unroll
            for (int j = 0; j < 32; ++j) S[j] = st.load(j * kD);
        pdl_wait_and_release();
        if (!has_row) return;
    } else {
        pdl_wait_and_release();
        r = a.row_begin[s], slot = a.slots[s];
        if (a.row_begin[s + 1] == r) return;
        st = state_of(slot);
#pragma unroll
        for (int j = 0; j < 32; ++j) S[j] = st.load(j * kD);
    }
    __shared__ float x_s[kChannels]; // conv outputs in T: q [0, kD), k [kD, 2 kD), v [2 kD, 3 kD)
    float next[kHist] = {};
    conv_block<T>(a, r, slot, t, ch, taps, x_s, next);
    cluster_arrive(); // this block has read its q/k conv state
    __syncthreads();
    const Gates gt =
        gdn_gates_of<T>(to_float(static_cast<const T*>(a.a)[r * a.a_s0 + h]),
                        to_float(static_cast<const T*>(a.b)[r * a.b_s0 + h]), A_log, dt_bias);
    const float k_mine = normalized_element(x_s + kD, rg, 1.0f); // k^[32 rg + lane]
    const float q_mine = normalized_element(x_s, rg, rsqrtf(float(kD)));
    const float o = delta_rule_step(S, gt, x_s[2 * kD + col], k_mine, q_mine, rg, col);
#pragma unroll
    for (int j = 0; j < 32; ++j) st.store(j * kD, S[j]);
    gated_norm_store<T>(a, r, h, col, o, norm_w);
    if (h % a.ratio != 0) return;
    cluster_wait(); // every block of the cluster has read the q/k conv state
    if (ch >= 0 && t < 2 * kD) {
        T* hist = static_cast<T*>(a.conv_state) + (slot * a.C + ch) * kHist;
#pragma unroll
        for (int j = 0; j < kHist; ++j) hist[j] = from_float<T>(next[j]);
    }
}

// The row-group kernel of build (kMinBlocks, kEarlyState) on `seqs` sequences.
template <typename T, int kMinBlocks, bool kEarlyState>
void launch_decode(const ExecContext& ctx, const DecodeArgs& a, int seqs) {
    launch_clustered(ctx, gdn_core_kernel<T, kMinBlocks, kEarlyState>, a, seqs, kThreads, 0,
                     "gdn_core_kernel");
}

} // namespace

GdnCoreVariant gdn_core_variant() {
    // Read at every call. At a decode batch of 256 the default build (one block an SM, the state
    // read after the wait) ran at 426 us a layer on an H100, 1.2 TB/s of its bf16 state (bench/
    // NOTES.md, nineteenth session): each SM's blocks go through their phases one at a time.
    const auto is = [](const char* name, const char* value) {
        const char* env = std::getenv(name);
        return env != nullptr && std::strcmp(env, value) == 0;
    };
    return {is("NINFER_GDN_CORE_BLOCKS", "2") ? 2 : 1, is("NINFER_GDN_CORE_EARLY_STATE", "1"),
            is("NINFER_GDN_CORE_COLUMNS", "1")};
}

bool gdn_core_fused_fits(const SeqBatch& batch, const TensorView& conv_w,
                         const TensorView& recurrent_state, int64_t Hk) {
    const int64_t Hv = recurrent_state.size(1);
    return fused_routes_enabled("gdn_core") && batch.max_rows_per_seq <= 1 && conv_w.size(1) == kConvK &&
           recurrent_state.size(2) == kD && recurrent_state.size(3) == kD &&
           Hv / Hk <= kMaxCluster && has_sm90_features(conv_w.device.index);
}

void gdn_core_fused(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
                    const TensorView& b, const TensorView& a, const TensorView& conv_w,
                    const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
                    float eps, const SeqBatch& batch, const TensorView& conv_state,
                    const TensorView& recurrent_state, const TensorView& core) {
    if (!has_sm90_features(ctx.device.index))
        fail(ErrorCategory::Unsupported, "gdn_core_fused needs sm_90's thread-block clusters, "
             "which cuda:", ctx.device.index, " does not offer (or portable mode is on)");
    if (batch.num_seqs == 0 || qkv.size(0) == 0) return;
    const int Hv = int(recurrent_state.size(1));
    const int64_t Hk = (qkv.size(1) - int64_t(Hv) * kD) / (2 * kD);
    const DecodeArgs args{qkv.data,
                          z.data,
                          b.data,
                          a.data,
                          qkv.stride[0],
                          z.stride[0],
                          b.stride[0],
                          a.stride[0],
                          conv_w.data,
                          A_log.data,
                          dt_bias.data,
                          norm_w.data,
                          conv_state.data,
                          {recurrent_state.data, recurrent_state.dtype == DType::BF16},
                          core.data,
                          batch.row_begin.ptr<int32_t>(),
                          batch.state_slot.ptr<int32_t>(),
                          qkv.size(1),
                          Hv,
                          int(Hv / Hk),
                          eps};
    dispatch_float(qkv.dtype, "gdn_core", [&](auto tag) {
        using E = decltype(tag);
        const GdnCoreVariant v = gdn_core_variant();
        if (v.columns)
            launch_columns<E>(ctx, args, batch.num_seqs, v.early_state);
        else if (v.blocks_per_sm == 2)
            v.early_state ? launch_decode<E, 2, true>(ctx, args, batch.num_seqs)
                          : launch_decode<E, 2, false>(ctx, args, batch.num_seqs);
        else
            v.early_state ? launch_decode<E, 1, true>(ctx, args, batch.num_seqs)
                          : launch_decode<E, 1, false>(ctx, args, batch.num_seqs);
    });
}

} // namespace ninfer::ops::cuda
