// The fused GDN decode kernels' shared pieces (gdn_core.cu: a block per (sequence, value head)
// holding the state in registers over 16 warps; gdn_core_columns.cu: 4 warps, the state staged
// in shared memory, a thread per state column). Both keep the unfused route's rounding points.
#pragma once

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gdn_state.cuh"

namespace ninfer::ops::cuda::gdn_decode {

constexpr int kD = 128;           // dk = dv: Qwen3.5's GDN head dim
constexpr int kConvK = 4;         // linear_conv_kernel_dim of every Qwen3.5
constexpr int kHist = kConvK - 1; // pre-conv inputs a conv state keeps
constexpr int kGroups = kD / 32;  // 32-wide column groups = 32-row row groups
constexpr int kChannels = 3 * kD; // conv channels a block reads: q, k, v heads
constexpr int kMaxCluster = 8;    // the portable cluster size

struct DecodeArgs {
    const void *qkv, *z, *b, *a;      // rows of in_proj's output, activation dtype
    int64_t qkv_s0, z_s0, b_s0, a_s0; // their row strides (elements)
    const void *conv_w, *A_log, *dt_bias, *norm_w;
    void* conv_state;  // [slots, C, kHist] activation dtype
    GdnStateRef state; // [slots, Hv, kD, kD], F32 or BF16
    void* core;        // [T, Hv, kD] activation dtype
    const int32_t *row_begin, *slots;
    int64_t C;
    int Hv, ratio; // value heads; value heads per key head (= the cluster size)
    float eps;
};

// barrier.cluster split in two: arrive (release) once a block has read what a sibling block will
// overwrite; wait (acquire) before overwriting it. Exited threads count as arrived.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}

// The conv channel of block thread t < kChannels: the q rows of key head hk, then its k rows,
// then value head h's v rows (qkv columns: q [0, Kd), k [Kd, 2 Kd), v [2 Kd, C), Kd = Hk kD).
inline __device__ int64_t conv_channel(int t, int hk, int h, int Hk) {
    const int64_t Kd = int64_t(Hk) * kD;
    if (t < kD) return int64_t(hk) * kD + t;
    if (t < 2 * kD) return Kd + int64_t(hk) * kD + (t - kD);
    return 2 * Kd + int64_t(h) * kD + (t - 2 * kD);
}

// One row of causal_conv1d_silu for one channel (conv_sequences' arithmetic): `hist` holds the
// kHist previous inputs, oldest first; `next` receives the state after this row. Returns the
// output rounded to T, as the unfused route stores it.
template <typename T>
__device__ float conv_silu(const T* hist_in, float cur, const float (&taps)[kConvK],
                           float (&next)[kHist]) {
    float hist[kHist];
#pragma unroll
    for (int j = 0; j < kHist; ++j) hist[j] = to_float(hist_in[j]);
    float sum = taps[kHist] * cur; // tap K-1 multiplies the current token
#pragma unroll
    for (int j = 0; j < kHist; ++j) sum += taps[j] * hist[j];
#pragma unroll
    for (int j = 0; j + 1 < kHist; ++j) next[j] = hist[j + 1];
    next[kHist - 1] = cur;
    return to_float(from_float<T>(sum / (1.0f + __expf(-sum))));
}

// gates_kernel's arithmetic for one (row, head): the decay e^g and beta rounded to T.
struct Gates {
    float decay, beta;
};
template <typename T> __device__ Gates gdn_gates_of(float a, float b, float A_log, float dt_bias) {
    const float av = a + dt_bias;
    const float softplus = av > 20.0f ? av : log1pf(__expf(av)); // torch's threshold 20
    const float g = -__expf(A_log) * softplus;
    // HF computes beta in the activation dtype.
    return {__expf(g), to_float(from_float<T>(1.0f / (1.0f + __expf(-b))))};
}

// Element lane + 32 * group of the dk-vector x (shared memory, kD values) l2-normalised and times
// `scale`, reduced in load_normalized's order. Every lane of the warp must call it.
inline __device__ float normalized_element(const float* x, int group, float scale) {
    const int lane = threadIdx.x & 31;
    float sum = 0.0f;
#pragma unroll
    for (int m = 0; m < kGroups; ++m) {
        const float v = x[lane + 32 * m];
        sum += v * v;
    }
    const float inv = rsqrtf(warp_sum(sum) + 1e-6f) * scale; // eps on the sum of squares
    return x[lane + 32 * group] * inv;
}

// Conv + SiLU of the block's channel t < kChannels (conv_channel: ch) into x_s[t].
// Writes the conv state of the block's own v channels; returns the q/k channels' next state in
// `next` (written later, once per key head). Weights `taps` were loaded before the PDL wait.
template <typename T>
__device__ void conv_block(const DecodeArgs& a, int64_t r, int64_t slot, int t, int64_t ch,
                           const float (&taps)[kConvK], float* x_s, float (&next)[kHist]) {
    if (ch < 0) return;
    T* hist = static_cast<T*>(a.conv_state) + (slot * a.C + ch) * kHist; // [slot, ch, :]
    const float cur = to_float(static_cast<const T*>(a.qkv)[r * a.qkv_s0 + ch]);
    x_s[t] = conv_silu<T>(hist, cur, taps, next);
    if (t >= 2 * kD) // v channels: read by this block alone
#pragma unroll
        for (int j = 0; j < kHist; ++j) hist[j] = from_float<T>(next[j]);
}

// The gated RMS norm of the head's output over its kD columns (gated_rms_norm_rows' order:
// warps 0..kGroups-1 hold columns 32 w + lane) and the store of core. o: this thread's column of
// the output before rounding; every thread of the block calls it.
template <typename T>
__device__ void gated_norm_store(const DecodeArgs& a, int64_t r, int h, int col, float o,
                                 float norm_w) {
    __shared__ float sq[kGroups];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float x = to_float(from_float<T>(o)); // the unfused route stores o in T
    float sum = 0.0f;
    sum += x * x;
    sum = warp_sum(sum);
    if (warp < kGroups && lane == 0) sq[warp] = sum;
    __syncthreads();
    if (warp >= kGroups) return;
    const float scale = rsqrtf(warp_sum(lane < kGroups ? sq[lane] : 0.0f) / float(kD) + a.eps);
    const float zg = to_float(static_cast<const T*>(a.z)[r * a.z_s0 + int64_t(h) * kD + col]);
    // HF rounds the normalised value to the activation dtype before the weight.
    const float n = to_float(from_float<T>(x * scale));
    static_cast<T*>(a.core)[(r * a.Hv + h) * kD + col] =
        from_float<T>(norm_w * n * (zg / (1.0f + __expf(-zg))));
}

// Launches `kernel` with a block per (sequence, value head), `threads` threads and `smem` bytes of
// dynamic shared memory, a cluster of `ratio` blocks (one key head's value heads) and, where
// enabled, programmatic dependent launch; `name` names it in errors.
inline void launch_clustered(const ExecContext& ctx, void (*kernel)(DecodeArgs),
                             const DecodeArgs& a, int seqs, int threads, size_t smem,
                             const char* name) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(seqs * a.Hv));
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = smem;
    config.stream = stream_of(ctx);
    cudaLaunchAttribute attribute[2] = {};
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = unsigned(a.ratio);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = pdl_enabled(ctx) ? 2 : 1;
    check(cudaLaunchKernelEx(&config, kernel, a), name);
}

// The column kernel (gdn_core_columns.cu) on `seqs` sequences, activation type T (float or
// __nv_bfloat16); early: the state's copy to shared memory issued before the PDL wait.
template <typename T>
void launch_columns(const ExecContext& ctx, const DecodeArgs& a, int seqs, bool early);

} // namespace ninfer::ops::cuda::gdn_decode
