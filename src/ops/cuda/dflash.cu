// Implements ops/dflash.h on CUDA.
// grouped_dynamic_conv: a thread per (row, channel); the row's segment start by a binary search
// of the device boundaries (the taps reach back at most to it).
// dflash_select: a block per sequence b, walking its K positions in order (each candidate set is
// scored against the previous choice, so the positions cannot run in parallel). Per position the
// block stages gated[r] = P[pred, r] g[b, i, r] in shared memory 512 values at a time, each of
// its 8 warps accumulates the dot products of 8 candidates' S rows (lane = r), and warp 0 picks
// from the k <= 64 scores (two per lane): the argmax, or the softmax and the prefix walk over u.
#include <algorithm>
#include <cfloat>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/dflash_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kConvThreads = 256;

// x, out: [T, H] (out contiguous); dynamic: [T, taps * G]; base: [taps, H]; segments: [S + 1].
template <typename T>
__global__ void grouped_dynamic_conv_rows(const T* x, int64_t x_s0, const T* dynamic,
                                          int64_t dyn_s0, const T* base, const int32_t* segments,
                                          int num_segments, int64_t rows, int H, int group_size,
                                          int taps, T* out) {
    pdl_wait_and_release();
    const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= rows * H) return;
    const int64_t t = e / H;
    const int c = int(e % H), g = c / group_size, G = H / group_size;
    // The segment holding t: segments[lo] <= t < segments[hi] (empty segments are skipped
    // because hi only moves to a boundary past t).
    int lo = 0, hi = num_segments;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (segments[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    const int n = int(min(int64_t(taps), t - segments[lo] + 1)); // no history across blocks
    const T* dyn = dynamic + t * dyn_s0;
    float sum = 0.0f;
    for (int o = 0; o < n; ++o)
        sum += (to_float(base[int64_t(o) * H + c]) + to_float(dyn[o * G + g])) *
               to_float(x[(t - o) * x_s0 + c]);
    out[t * H + c] = from_float<T>(sum);
}

constexpr int kMaxCand = 64;
constexpr int kSelectWarps = 8;
constexpr int kCandPerWarp = kMaxCand / kSelectWarps; // candidate c is warp c % 8's
constexpr int kGatedChunk = 512;

struct SelectArgs {
    const float* unary;    // [B, K, k]
    const int32_t* cand;   // [B, K, k]
    const void* g;         // [B, K, R]
    const void* P;         // [V, R]
    const void* S;         // [V, R]
    const int32_t* anchor; // [B]
    const float* u;        // [B, K], null when greedy
    float temperature;
    int K, k, R, V;
    int32_t* path; // [B, K]
    float* q;      // [B, K, k]
};

// e[c] for the k candidates of position (b, i) = row pi, given the predecessor id.
template <typename T>
__device__ void score_candidates(const SelectArgs& a, int64_t pi, int32_t pred, float* gated,
                                 float* e) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const T* g = static_cast<const T*>(a.g) + pi * a.R;
    const T* p_row = static_cast<const T*>(a.P) + int64_t(pred) * a.R;
    const int32_t* cand = a.cand + pi * a.k;
    float acc[kCandPerWarp] = {};
    for (int r0 = 0; r0 < a.R; r0 += kGatedChunk) {
        const int n = min(kGatedChunk, a.R - r0);
        __syncthreads(); // the previous chunk (or position) is no longer read
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            gated[j] = to_float(p_row[r0 + j]) * to_float(g[r0 + j]);
        __syncthreads();
#pragma unroll
        for (int m = 0; m < kCandPerWarp; ++m) {
            const int c = warp + m * kSelectWarps;
            if (c >= a.k) break;
            const T* s_row = static_cast<const T*>(a.S) + int64_t(cand[c]) * a.R + r0;
            for (int j = lane; j < n; j += 32) acc[m] += gated[j] * to_float(s_row[j]);
        }
    }
#pragma unroll
    for (int m = 0; m < kCandPerWarp; ++m) {
        const int c = warp + m * kSelectWarps;
        if (c >= a.k) break;
        const float dot = warp_sum(acc[m]);
        if (lane == 0) e[c] = a.unary[pi * a.k + c] + dot;
    }
    __syncthreads();
}

// The (value, index) pair that wins: the larger value, the lower index on ties.
__device__ __forceinline__ void better(float& v, int& j, float v2, int j2) {
    if (v2 > v || (v2 == v && j2 < j)) v = v2, j = j2;
}

// Warp 0: the choice at row pi from e[0, k); writes q's row and returns j (on lane 0).
__device__ int choose(const SelectArgs& a, int64_t pi, const float* e, float* q_s) {
    const int lane = threadIdx.x & 31;
    float* q = a.q + pi * a.k;
    if (!a.u) { // greedy: the lowest c with the largest e[c]
        float best = -FLT_MAX;
        int j = a.k;
        for (int c = lane; c < a.k; c += 32) better(best, j, e[c], c);
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float v2 = __shfl_xor_sync(0xffffffffu, best, offset);
            const int j2 = __shfl_xor_sync(0xffffffffu, j, offset);
            better(best, j, v2, j2);
        }
        if (j >= a.k) j = 0; // every score NaN or -inf: the first candidate, as the CPU's loop
        for (int c = lane; c < a.k; c += 32) q[c] = c == j ? 1.0f : 0.0f;
        return j;
    }
    float m = -FLT_MAX;
    for (int c = lane; c < a.k; c += 32) m = fmaxf(m, e[c] / a.temperature);
    m = warp_max(m);
    float sum = 0.0f;
    for (int c = lane; c < a.k; c += 32) sum += q_s[c] = expf(e[c] / a.temperature - m);
    sum = warp_sum(sum);
    for (int c = lane; c < a.k; c += 32) q[c] = q_s[c] = q_s[c] / sum;
    __syncwarp();
    // The first c whose inclusive prefix sum of q exceeds u (k - 1 when none does), summed in
    // order as the CPU does: k <= 64 adds on one lane.
    int j = a.k - 1;
    if (lane == 0) {
        const float u = a.u[pi];
        float prefix = 0.0f;
        for (int c = 0; c + 1 < a.k; ++c) {
            prefix += q_s[c];
            if (prefix > u) {
                j = c;
                break;
            }
        }
    }
    return j;
}

// Marks positions [i, K) of sequence b as not computed: path -1, q 0 (an id outside the
// codebooks, which the device cannot report; the CPU rejects it).
__device__ void mark_invalid(const SelectArgs& a, int64_t b, int i) {
    for (int64_t e = threadIdx.x; e < int64_t(a.K - i) * a.k; e += blockDim.x)
        a.q[(b * a.K + i) * a.k + e] = 0.0f;
    for (int p = i + threadIdx.x; p < a.K; p += blockDim.x) a.path[b * a.K + p] = -1;
}

template <typename T>
__global__ void __launch_bounds__(32 * kSelectWarps) dflash_select_walk(SelectArgs a) {
    pdl_wait_and_release();
    __shared__ float gated[kGatedChunk];
    __shared__ float e[kMaxCand], q_s[kMaxCand];
    __shared__ int32_t next_pred;
    const int64_t b = blockIdx.x;
    int32_t pred = a.anchor[b];
    for (int i = 0; i < a.K; ++i) {
        const int64_t pi = b * a.K + i;
        bool bad = pred < 0 || pred >= a.V;
        for (int c = threadIdx.x; c < a.k; c += blockDim.x) {
            const int32_t id = a.cand[pi * a.k + c];
            bad = bad || id < 0 || id >= a.V;
        }
        if (__syncthreads_or(bad)) return mark_invalid(a, b, i);
        score_candidates<T>(a, pi, pred, gated, e);
        if (threadIdx.x < 32) {
            const int j = choose(a, pi, e, q_s);
            if (threadIdx.x == 0) a.path[pi] = next_pred = a.cand[pi * a.k + j];
        }
        __syncthreads();
        pred = next_pred;
    }
}

} // namespace

void grouped_dynamic_conv(const ExecContext& ctx, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size, const int32_t* host_segments,
                          const TensorView& segments, const TensorView& out) {
    const int64_t T = x.size(0), H = x.size(1), taps = base.size(0);
    require(H <= INT32_MAX && taps <= INT32_MAX && segments.size(0) <= INT32_MAX,
            "grouped_dynamic_conv: CUDA takes 32-bit channel, tap and segment counts");
    const int64_t n = T * H;
    dispatch_float(x.dtype, "grouped_dynamic_conv", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, grouped_dynamic_conv_rows<E>, blocks_for(n, kConvThreads), kConvThreads, 0,
                   x.ptr<const E>(), x.stride[0], dynamic.ptr<const E>(), dynamic.stride[0],
                   base.ptr<const E>(), segments.ptr<const int32_t>(), int(segments.size(0) - 1), T,
                   int(H), int(group_size), int(taps), out.ptr<E>());
    });
    check_launch("grouped_dynamic_conv_rows");
}

void dflash_select(const ExecContext& ctx, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q) {
    const int64_t B = unary.size(0), K = unary.size(1), k = unary.size(2);
    const int64_t R = g.size(2), V = P.size(0);
    require(B <= INT32_MAX && K <= INT32_MAX && R <= INT32_MAX && V <= INT32_MAX,
            "dflash_select: CUDA takes 32-bit sizes");
    const bool sampling = temperature > 0.0f;
    SelectArgs a{unary.ptr<const float>(),
                 cand.ptr<const int32_t>(),
                 g.data,
                 P.data,
                 S.data,
                 anchor.ptr<const int32_t>(),
                 sampling ? u.ptr<const float>() : nullptr,
                 temperature,
                 int(K),
                 int(k),
                 int(R),
                 int(V),
                 path.ptr<int32_t>(),
                 q.ptr<float>()};
    dispatch_float(g.dtype, "dflash_select", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, dflash_select_walk<E>, dim3(unsigned(B)), 32 * kSelectWarps, 0, a);
    });
    check_launch("dflash_select_walk");
}

} // namespace ninfer::ops::cuda
