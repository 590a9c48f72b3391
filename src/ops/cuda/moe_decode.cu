// Implements moe_block's decode route (ops/moe.h) on CUDA: the MoE block after the router linear
// in two kernels (it took ~8, each boundary ~2 us in a graph even with PDL), for the T * top_k
// pairs the route table gives it (moe_block.dense / .fp8 / .grouped, ops/route_table.h: built in
// 64, 192 and 192 pairs, measured on the H200) and 16-byte aligned rows of whole 16-byte loads
// (moe_block_decode_fits).
//   moe_up_kernel: block (i-chunk, pair j, token t). Pairs j < top_k are the routed experts: warp
//     0 recomputes the token's route from the logits (moe_route's arithmetic and tie rule) and
//     hands the round-j expert to the block; pair top_k is the shared expert, whose rows are
//     known before the dependency wait, so its first loads are issued before it. Warp -> row i:
//     act[t, j, i] = silu(G h) * (U h) in f32. One block also stores the route (ids, weights).
//     Under expert parallelism a pair routed to an expert the stacks do not hold (ops/moe.h)
//     idles; its route id is -1.
//   moe_down_kernel: block (column chunk, token t), warp -> column c: the shared expert's row
//     (prefetched before the wait) times sigmoid(gate logit), plus sum_j w_j * down_e[c, :] .
//     act[t, j] over the held pairs in a fixed order, added to y[t, c] with one rounding: no
//     atomics, deterministic. Opt-in (NINFER_MOE_DOWN_EARLY_ROUTE=1), every expert held: the
//     route is recomputed from the logits before the wait and the routed rows' first batch
//     issued then, checked against moe_up_kernel's route after it (see the kernel).
// Weight rows stream as 16-byte evict-first loads, kUpBatch / W::kDownBatch steps in flight.
// The kernels are templated on the weight format W:
//   - DenseWeights<T>: F32 or BF16 weights in the activation dtype T, 8 elements a load (H, I,
//     Is multiples of 8);
//   - Fp8Weights (moe_decode_fp8.cuh): block-wise fp8 codes with F32 block scales and BF16
//     activations, 16 codes a load (H, I, Is multiples of 16, Bc % 16 == 0; all four weights
//     fp8 with one block size, else the dispatcher runs the composition). Each load's 16-term
//     partial dot product is formed in f32 and multiplied by its block's scale.
//   - GroupedWeights<S, BITS> (moe_decode_grouped.cuh): groupwise W8/Q4 codes with F16 or F32
//     group scales and BF16 activations, 16 bytes a load (16 or 32 codes; H, I, Is multiples of
//     that, groups of whole loads; all four weights of one width and scale dtype).
// Numerics either way: f32 products and accumulation, y rounded once.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/moe_decode_fp8.cuh"
#include "ops/cuda/moe_decode_grouped.cuh"
#include "ops/cuda/moe_route.cuh"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

using moe_decode::Fp8Weights;
using moe_decode::GroupedWeights;

constexpr int kWarps = 8;               // warps per block, both kernels
constexpr int kMaxExpertsPerLane = 16;  // E <= 512 (the route keeps E / 32 logits per lane)
constexpr int kMaxTopK = 32;            // lane j holds the round-j choice
// Load steps in flight per lane. Up: 2 rows (gate, up) x 2 steps = 4 x 16 bytes; at T = 1 the
// 35B's 9 x 512 row warps are all resident (up_blocks_per_sm) and keep ~9 MB in the air, twice
// what HBM latency at 4.8 TB/s needs (4 steps cost 64 registers: a second wave). Down
// (W::kDownBatch): a column needs top_k x I / (32 W::kElems) steps, 16 at the 35B's shapes in
// bf16 (8 in fp8): all of them in one batch, issued before the shared expert's dot products (with
// 8, two serial HBM round trips per warp held the bf16 kernel at 1.2 TB/s: ncu, H200). f32 rows
// take twice the registers per step: 8.
constexpr int kUpBatch = 2;
constexpr int kSharedDownPre = 2; // shared_down steps prefetched before the wait (Is = 512: all)
// The 35B at T = 1 runs 9 pairs x 64 blocks of moe_up_kernel: 5 blocks per SM (<= 48
// registers) keep them in one wave on 132 SMs (4 would leave 48 blocks for a tail wave). The
// bf16 and fp8 kernels with <= 256 experts fit in 48 registers; the others take 4 rather than
// spill.
template <typename W, int kPerLane> constexpr int up_blocks_per_sm() {
    return W::kLightUp && kPerLane <= 8 ? 5 : 4;
}

// 8 consecutive elements of a row as loaded: 16 bytes of bf16 or 32 of f32.
template <typename T> struct Raw8;
template <> struct Raw8<__nv_bfloat16> { uint4 v; };
template <> struct Raw8<float> { float4 a, b; };

// Weights are read once: evict-first streaming loads. Activations are shared by every warp of
// the grid: read-only cache.
__device__ __forceinline__ Raw8<__nv_bfloat16> load_stream(const __nv_bfloat16* p) {
    return {__ldcs(reinterpret_cast<const uint4*>(p))};
}
__device__ __forceinline__ Raw8<float> load_stream(const float* p) {
    return {__ldcs(reinterpret_cast<const float4*>(p)),
            __ldcs(reinterpret_cast<const float4*>(p + 4))};
}
__device__ __forceinline__ Raw8<__nv_bfloat16> load_cached(const __nv_bfloat16* p) {
    return {__ldg(reinterpret_cast<const uint4*>(p))};
}
__device__ __forceinline__ Raw8<float> load_cached(const float* p) {
    return {__ldg(reinterpret_cast<const float4*>(p)),
            __ldg(reinterpret_cast<const float4*>(p + 4))};
}

__device__ __forceinline__ void to_float8(const Raw8<__nv_bfloat16>& r, float (&v)[8]) {
    bf16x8_to_float(r.v, v);
}
__device__ __forceinline__ void to_float8(const Raw8<float>& r, float (&v)[8]) {
    v[0] = r.a.x, v[1] = r.a.y, v[2] = r.a.z, v[3] = r.a.w;
    v[4] = r.b.x, v[5] = r.b.y, v[6] = r.b.z, v[7] = r.b.w;
}

// N (a multiple of 8) consecutive activations as floats, through the read-only cache.
template <int N, typename T>
__device__ __forceinline__ void load_floats(const T* p, float (&v)[N]) {
#pragma unroll
    for (int h = 0; h < N / 8; ++h) {
        float part[8];
        to_float8(load_cached(p + 8 * h), part);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[8 * h + j] = part[j];
    }
}

// Dense weights in the activation dtype T (F32 or BF16); the interface of Fp8Weights.
template <typename T> struct DenseWeights {
    using Act = T;
    static constexpr int kElems = 8; // elements per lane per load: 16 bytes of bf16
    static constexpr int kDownBatch = sizeof(T) == 2 ? 16 : 8;
    static constexpr bool kLightUp = sizeof(T) == 2;
    using Raw = Raw8<T>;
    struct Mat { // a 2-D weight [N, K] or a stack [E, N, K] (expert_elems = 0 for 2-D)
        const T* w;
        int64_t expert_elems; // N * K
    };
    struct Row {
        const T* w;
    };

    static Mat mat(const WeightView& w) {
        return {w.w.ptr<const T>(), w.w.ndim == 3 ? w.size(1) * w.size(2) : 0};
    }
    __device__ __forceinline__ static Row row(const Mat& m, int64_t r, int64_t K) {
        return {m.w + r * K};
    }
    __device__ __forceinline__ static Row expert(const Mat& m, const Row& r, int e) {
        return {r.w + int64_t(e) * m.expert_elems};
    }
    __device__ __forceinline__ static Raw load(const Mat&, const Row& r, int64_t col) {
        return load_stream(r.w + col);
    }
    __device__ __forceinline__ static float dot(const float (&x)[8], const Raw& raw) {
        float w[8];
        to_float8(raw, w);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += x[j] * w[j];
        return sum;
    }
    // sg += g . x[0, 8), su += u . x[0, 8) for activations x (read-only cache).
    __device__ __forceinline__ static void dot2(const T* x, const Raw& g, const Raw& u, float& sg,
                                                float& su) {
        float xv[8];
        to_float8(load_cached(x), xv);
        sg += dot(xv, g);
        su += dot(xv, u);
    }
};

template <typename W> constexpr int kWarpElems = 32 * W::kElems; // elements a warp loads a step
template <typename W> using WMat = typename W::Mat;
template <typename W> using WRow = typename W::Row;
template <typename W> using WRaw = typename W::Raw;

// The arguments of both kernels (row strides in elements).
template <typename W> struct MoeArgs {
    using T = typename W::Act;
    const T* h; // [T, H], row stride h_s0
    int64_t h_s0;
    const float* logits; // [T, E + 1], row stride l_s0: column E gates the shared expert
    int64_t l_s0;
    int E, k;
    int first, held;                       // the stacks hold experts [first, first + held) of E
    WMat<W> experts_gate_up, experts_down; // [held, 2I, H], [held, H, I]
    WMat<W> shared_gate_up, shared_down;   // [2Is, H], [H, Is]
    int64_t H, I, Is;
    float* act; // [T, k + 1, act_w], act_w = max(I, Is): scratch written by moe_up_kernel
    int64_t act_w;
    float* route_w;     // [T, k], scratch written by moe_up_kernel
    int32_t* route_ids; // [T, k], scratch written by moe_up_kernel
    T* y;               // [T, H], row stride y_s0
    int64_t y_s0;
    int early_route; // moe_down_kernel's early route: 0 off, 1 on, 2 its sabotage arm
};

// Issues kN load steps of a row of m from column c0 (lane columns c < n only).
template <typename W, int kN>
__device__ __forceinline__ void load_steps(const WMat<W>& m, const WRow<W>& row, int64_t c0,
                                           int64_t n, WRaw<W> (&raw)[kN]) {
    const int64_t lane_c = c0 + (threadIdx.x & 31) * W::kElems;
#pragma unroll
    for (int s = 0; s < kN; ++s)
        if (lane_c + s * kWarpElems<W> < n) raw[s] = W::load(m, row, lane_c + s * kWarpElems<W>);
}

// act[0, kElems) . raw for f32 activations.
template <typename W>
__device__ __forceinline__ float dot_act(const float* act, const WRaw<W>& raw) {
    float av[W::kElems];
    load_floats(act, av);
    return W::dot(av, raw);
}

// Lane partial of the kN loaded steps . act[c0, n).
template <typename W, int kN>
__device__ __forceinline__ float dot_steps(const float* act, int64_t c0, int64_t n,
                                           const WRaw<W> (&raw)[kN]) {
    const int64_t lane_c = c0 + (threadIdx.x & 31) * W::kElems;
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kN; ++s)
        if (lane_c + s * kWarpElems<W> < n)
            sum += dot_act<W>(act + lane_c + s * kWarpElems<W>, raw[s]);
    return sum;
}

// Adds the batch's dot products with x to (sg, su).
template <typename W>
__device__ __forceinline__ void dot_up_batch(const typename W::Act* x, int64_t c0, int64_t H,
                                             const WRaw<W> (&rg)[kUpBatch],
                                             const WRaw<W> (&ru)[kUpBatch], float& sg, float& su) {
    const int64_t lane_c = c0 + (threadIdx.x & 31) * W::kElems;
#pragma unroll
    for (int s = 0; s < kUpBatch; ++s) {
        const int64_t c = lane_c + s * kWarpElems<W>;
        if (c >= H) continue;
        W::dot2(x + c, rg[s], ru[s], sg, su);
    }
}

// act[t, j, i] = silu(g . x) * (up . x) for x = h[t] and rows g, up of m, the first load batch
// already in (rg, ru).
template <typename W>
__device__ __forceinline__ void up_row(const MoeArgs<W>& a, const WMat<W>& m, const WRow<W>& g,
                                       const WRow<W>& up, int64_t t, int j, int64_t i,
                                       WRaw<W> (&rg)[kUpBatch], WRaw<W> (&ru)[kUpBatch]) {
    const typename W::Act* x = a.h + t * a.h_s0;
    float sg = 0.0f, su = 0.0f;
    dot_up_batch<W>(x, 0, a.H, rg, ru, sg, su);
    for (int64_t c0 = kUpBatch * kWarpElems<W>; c0 < a.H; c0 += kUpBatch * kWarpElems<W>) {
        load_steps<W>(m, g, c0, a.H, rg), load_steps<W>(m, up, c0, a.H, ru);
        dot_up_batch<W>(x, c0, a.H, rg, ru, sg, su);
    }
    sg = warp_sum(sg);
    su = warp_sum(su);
    if ((threadIdx.x & 31) == 0)
        a.act[(t * (a.k + 1) + j) * a.act_w + i] = sg / (1.0f + __expf(-sg)) * su;
}

// The block's routed expert (round j of token t's route), from warp 0 through shared memory.
// The last routed pair's first block computes every round and stores the route for the down
// kernel. All threads of the block must call it.
template <int kPerLane, typename W>
__device__ int block_expert(const MoeArgs<W>& a, int64_t t, int j) {
    __shared__ int expert;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const bool writer = j == a.k - 1 && blockIdx.x == 0;
        const WarpRoute r = route_warp<kPerLane>(a.logits + t * a.l_s0, a.E, writer ? a.k : j + 1);
        if (lane == j) expert = r.id;
        if (writer)
            store_route(r, a.k, a.route_w + t * a.k, a.route_ids + t * a.k, a.first, a.held);
    }
    __syncthreads();
    return expert;
}

// Grid (ceil(max(I, Is) / kWarps), k + 1, T); warp -> row i of pair j = blockIdx.y of token t.
// Blocks past a pair's width idle (I != Is).
template <typename W, int kPerLane>
__global__ void __launch_bounds__(32 * kWarps, up_blocks_per_sm<W, kPerLane>())
    moe_up_kernel(MoeArgs<W> a) {
    const int64_t t = blockIdx.z;
    const int j = blockIdx.y;
    const int64_t i = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    WRaw<W> rg[kUpBatch] = {}, ru[kUpBatch] = {};
    if (j == a.k) { // the shared expert
        const int64_t row = i < a.Is ? i : 0;
        const WRow<W> g = W::row(a.shared_gate_up, row, a.H);
        const WRow<W> up = W::row(a.shared_gate_up, a.Is + row, a.H);
        // Its weights are written only while a model loads, never by a kernel in flight, so the
        // first loads may precede the wait (pdl_wait_and_release's weight exception).
        load_steps<W>(a.shared_gate_up, g, 0, a.H, rg);
        load_steps<W>(a.shared_gate_up, up, 0, a.H, ru);
        pdl_wait_and_release();
        if (i < a.Is) up_row(a, a.shared_gate_up, g, up, t, j, i, rg, ru);
        return;
    }
    pdl_wait_and_release();
    if (int64_t(blockIdx.x) * kWarps >= a.I) return; // block-uniform
    const int e = held_id(block_expert<kPerLane>(a, t, j), a.first, a.held);
    if (e < 0 || i >= a.I) return; // another rank's expert (block-uniform), or past I
    const WMat<W>& m = a.experts_gate_up;
    const WRow<W> g = W::expert(m, W::row(m, i, a.H), e);
    const WRow<W> up = W::expert(m, W::row(m, a.I + i, a.H), e);
    load_steps<W>(m, g, 0, a.H, rg), load_steps<W>(m, up, 0, a.H, ru);
    up_row(a, m, g, up, t, j, i, rg, ru);
}

// The kh held routed rows of output column c as one stream of kh * S load steps (S per row of
// I): item q is step q % S of held pair q / S's row (lane j holds the j-th held pair's expert id,
// weight and pair index src), so a batch of W::kDownBatch items spans pairs. issue_routed loads
// items [q0, q0 + W::kDownBatch); consume_routed adds their lane partial of
// sum_j w_j * down_{e_j}[c, :] . act[src_j, :], in order.
template <typename W>
__device__ __forceinline__ void issue_routed(const WMat<W>& m, const WRow<W>& down_c, int64_t I,
                                             int S, int items, int q0, int id,
                                             WRaw<W> (&raw)[W::kDownBatch]) {
    const int lane = threadIdx.x & 31;
    int j = q0 / S, step = q0 - j * S;
#pragma unroll
    for (int u = 0; u < W::kDownBatch; ++u) {
        if (q0 + u >= items) break; // warp-uniform
        const int64_t col = int64_t(step) * kWarpElems<W> + lane * W::kElems;
        const int e = __shfl_sync(0xffffffffu, id, j);
        if (col < I) raw[u] = W::load(m, W::expert(m, down_c, e), col);
        if (++step == S) step = 0, ++j;
    }
}
template <typename W>
__device__ __forceinline__ float consume_routed(const float* act, int64_t act_w, int64_t I, int S,
                                                int items, int q0, float w, int src,
                                                const WRaw<W> (&raw)[W::kDownBatch]) {
    const int lane = threadIdx.x & 31;
    int j = q0 / S, step = q0 - j * S;
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < W::kDownBatch; ++u) {
        if (q0 + u >= items) break;
        const int64_t col = int64_t(step) * kWarpElems<W> + lane * W::kElems;
        const float wj = __shfl_sync(0xffffffffu, w, j);
        const int pair = __shfl_sync(0xffffffffu, src, j);
        if (col < I) sum += wj * dot_act<W>(act + pair * act_w + col, raw[u]);
        if (++step == S) step = 0, ++j;
    }
    return sum;
}

// The held pairs of a token's route (ids -1: another rank's experts) compacted to lanes
// [0, count) in pair order: lane q gets the q-th held pair's expert id, weight and index src.
struct HeldPair {
    int id, src, count;
    float w;
};
__device__ __forceinline__ HeldPair held_pair(const int32_t* ids, const float* weights, int k) {
    const int lane = threadIdx.x & 31;
    const int id = lane < k ? ids[lane] : -1;
    const float w = lane < k ? weights[lane] : 0.0f;
    const unsigned held = __ballot_sync(0xffffffffu, id >= 0);
    int src = 0; // the pair whose rank among the held ones is this lane
    for (int m = 0; m < k; ++m)
        if (((held >> m) & 1u) && __popc(held & ((1u << m) - 1u)) == lane) src = m;
    const int count = __popc(held);
    // Every lane shuffles (a shuffle some lanes skip pairs with another call's: undefined).
    const int src_id = __shfl_sync(0xffffffffu, id, src);
    const float src_w = __shfl_sync(0xffffffffu, w, src);
    return {src_id, src, count, lane < count ? src_w : 0.0f};
}

// Grid (ceil(H / kWarps), T); warp -> output column c of token t.
// 2 blocks per SM (<= 128 registers) keep the 35B's H / 8 = 256 blocks in one wave.
// Early route (a.early_route, every expert held; opt-in: NINFER_MOE_DOWN_EARLY_ROUTE=1): each
// warp computes the token's route from the router logits before the dependency wait and issues
// its routed rows' first batch, so their HBM round trip overlaps moe_up_kernel instead of
// following it. The logits are the router's output, two launches back: moe_up_kernel released
// this grid only after its own wait, i.e. after the router had completed, and they are read from
// L2 (never a stale L1 line). After the wait the route moe_up_kernel stored decides: where any
// lane's expert differs from the early one (sabotage arm: the last pair's id shifted), the batch
// is issued again, so the output never depends on the early read.
// kEarly instantiates the early route (the kernel without it is the one measured and tested);
// kPerLane is its route's logits per lane.
template <typename W, bool kEarly, int kPerLane = 8>
__global__ void __launch_bounds__(32 * kWarps, 2) moe_down_kernel(MoeArgs<W> a) {
    const int64_t t = blockIdx.y;
    const int64_t c = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const WRow<W> srow = W::row(a.shared_down, c < a.H ? c : 0, a.Is);
    WRaw<W> pre[kSharedDownPre] = {};
    // Weights only (see moe_up_kernel): the shared expert's first steps before the wait.
    load_steps<W>(a.shared_down, srow, 0, a.Is, pre);
    WRaw<W> raw[W::kDownBatch] = {};
    [[maybe_unused]] int early_id = 0;
    if constexpr (kEarly) {
        if (a.held == a.E) { // block-uniform
            const WarpRoute r = route_warp<kPerLane, true>(a.logits + t * a.l_s0, a.E, a.k);
            early_id = lane < a.k ? r.id : 0;
            if (a.early_route == 2 && lane == a.k - 1) early_id = (early_id + 1) % a.E;
            const int S = int((a.I + kWarpElems<W> - 1) / kWarpElems<W>);
            issue_routed<W>(a.experts_down, W::row(a.experts_down, c < a.H ? c : 0, a.I), a.I, S,
                            a.k * S, 0, early_id, raw);
        }
    }
    pdl_wait_and_release();
    if (c >= a.H) return;
    // The route first, then the routed rows' first batch, so their HBM latency overlaps the
    // shared expert's dot products and the gate below.
    // Every expert here (no expert parallelism): the pairs in route order, no compaction.
    const HeldPair p = a.held == a.E
                           ? HeldPair{lane < a.k ? a.route_ids[t * a.k + lane] : 0, lane, a.k,
                                      lane < a.k ? a.route_w[t * a.k + lane] : 0.0f}
                           : held_pair(a.route_ids + t * a.k, a.route_w + t * a.k, a.k);
    const int id = p.id, src = p.src;
    const float w = p.w;
    const WRow<W> down_c = W::row(a.experts_down, c, a.I);
    const int S = int((a.I + kWarpElems<W> - 1) / kWarpElems<W>), items = p.count * S;
    bool issue = true; // the early batch stands only where every lane's expert is the route's
    if constexpr (kEarly) issue = a.held != a.E || !__all_sync(0xffffffffu, id == early_id);
    if (issue) issue_routed<W>(a.experts_down, down_c, a.I, S, items, 0, id, raw);
    const float* act = a.act + t * (a.k + 1) * a.act_w; // [k + 1, act_w] of token t
    const float* shared_act = act + a.k * a.act_w;
    float shared_sum = dot_steps<W>(shared_act, 0, a.Is, pre);
    for (int64_t c0 = kSharedDownPre * kWarpElems<W>; c0 < a.Is;
         c0 += kSharedDownPre * kWarpElems<W>) {
        load_steps<W>(a.shared_down, srow, c0, a.Is, pre);
        shared_sum += dot_steps<W>(shared_act, c0, a.Is, pre);
    }
    const float gate = 1.0f / (1.0f + __expf(-a.logits[t * a.l_s0 + a.E]));
    float routed = 0.0f; // in a fixed order: deterministic
    for (int q0 = 0;;) {
        routed += consume_routed<W>(act, a.act_w, a.I, S, items, q0, w, src, raw);
        q0 += W::kDownBatch;
        if (q0 >= items) break;
        issue_routed<W>(a.experts_down, down_c, a.I, S, items, q0, id, raw);
    }
    float sum = gate * shared_sum + routed;
    sum = warp_sum(sum);
    if (lane == 0)
        a.y[t * a.y_s0 + c] = from_float<typename W::Act>(to_float(a.y[t * a.y_s0 + c]) + sum);
}

// moe_down_kernel's early route, read at every call (a test or an A/B flips it; a captured graph
// keeps the mode of its capture): NINFER_MOE_DOWN_EARLY_ROUTE=1 on, "sabotage" its sabotage arm
// (one early id wrong: the output must not change), unset or 0 off. Off by default until its CUDA
// tests and an A/B have run on a GPU.
int early_route_mode() {
    const char* env = std::getenv("NINFER_MOE_DOWN_EARLY_ROUTE");
    if (env == nullptr || *env == '\0' || std::strcmp(env, "0") == 0) return 0;
    return std::strcmp(env, "sabotage") == 0 ? 2 : 1;
}

template <typename W>
void launch(const ExecContext& ctx, const TensorView& h, const TensorView& logits, int k,
            const WeightView& egu, const WeightView& edown, const WeightView& sgu,
            const WeightView& sdown, const TensorView& y, int64_t first) {
    using T = typename W::Act;
    const int64_t T_ = h.size(0), H = h.size(1), E = logits.size(1) - 1, I = edown.size(2);
    const int64_t Is = sdown.size(1), act_w = std::max(I, Is);
    // The stream's workspace (no allocation node in a captured graph): act [T, k + 1, act_w] |
    // route_w [T, k] | route_ids [T, k] (int32 in f32 slots).
    float* act = static_cast<float*>(
        stream_workspace(ctx, size_t(T_ * (k + 1) * act_w + 2 * T_ * k) * sizeof(float)));
    float* route_w = act + T_ * (k + 1) * act_w;
    int32_t* route_ids = reinterpret_cast<int32_t*>(route_w + T_ * k);
    MoeArgs<W> a;
    a.h = h.ptr<T>(), a.h_s0 = h.stride[0], a.logits = logits.ptr<float>();
    a.l_s0 = logits.stride[0], a.E = int(E), a.k = k;
    a.first = int(first), a.held = int(egu.size(0));
    a.experts_gate_up = W::mat(egu), a.experts_down = W::mat(edown);
    a.shared_gate_up = W::mat(sgu), a.shared_down = W::mat(sdown);
    a.H = H, a.I = I, a.Is = Is, a.act = act, a.act_w = act_w;
    a.route_w = route_w, a.route_ids = route_ids, a.y = y.ptr<T>(), a.y_s0 = y.stride[0];
    a.early_route = early_route_mode();
    const dim3 up_grid(blocks_for(act_w, kWarps), unsigned(k + 1), unsigned(T_));
    const dim3 down_grid(blocks_for(H, kWarps), unsigned(T_));
    const bool few = E <= 32 * 8; // 8 logits a lane
    if (few)
        launch_pdl(ctx, moe_up_kernel<W, 8>, up_grid, 32 * kWarps, 0, a);
    else
        launch_pdl(ctx, moe_up_kernel<W, kMaxExpertsPerLane>, up_grid, 32 * kWarps, 0, a);
    if (a.early_route == 0)
        launch_pdl(ctx, moe_down_kernel<W, false>, down_grid, 32 * kWarps, 0, a);
    else if (few)
        launch_pdl(ctx, moe_down_kernel<W, true, 8>, down_grid, 32 * kWarps, 0, a);
    else
        launch_pdl(ctx, moe_down_kernel<W, true, kMaxExpertsPerLane>, down_grid, 32 * kWarps, 0, a);
}

} // namespace

namespace {

// Calls fn(GroupedWeights<S, BITS>{}) for the format of groupwise weight w (F16 or F32 scales,
// 8 or 4 bits).
template <typename Fn> decltype(auto) with_grouped(const WeightView& w, Fn&& fn) {
    const bool half = w.scale.dtype == DType::F16;
    if (w.group_bits == 8)
        return half ? fn(GroupedWeights<__half, 8>{}) : fn(GroupedWeights<float, 8>{});
    return half ? fn(GroupedWeights<__half, 4>{}) : fn(GroupedWeights<float, 4>{});
}

} // namespace

bool moe_block_decode_fits(const TensorView& h, const TensorView& router_logits, int64_t top_k,
                           const WeightView& experts_gate_up, const WeightView& experts_down,
                           const WeightView& shared_gate_up, const WeightView& shared_down) {
    const WeightView* const w[4] = {&experts_gate_up, &experts_down, &shared_gate_up, &shared_down};
    int fp8 = 0, grouped = 0;
    for (const WeightView* v : w) fp8 += v->is_fp8(), grouped += v->is_grouped();
    // Mixed dense and quantized weights: the composition.
    if ((fp8 != 0 && fp8 != 4) || (grouped != 0 && grouped != 4)) return false;
    // Elements per 16-byte load: H, I and Is hold whole loads.
    const int64_t elems = fp8       ? Fp8Weights::kElems
                          : grouped ? (experts_gate_up.group_bits == 8 ? kCodesPerLoad<8>
                                                                       : kCodesPerLoad<4>)
                                    : DenseWeights<float>::kElems;
    const int64_t H = h.size(1), I = experts_down.size(2), Is = shared_down.size(1);
    const RouteId route = fp8 ? RouteId::MoeBlockFp8
                          : grouped ? RouteId::MoeBlockGrouped
                                    : RouteId::MoeBlockDense;
    bool fits = fused_routes_enabled("moe_block") &&
                active_route_table().route(route, h.size(0) * top_k) == kRouteFusedDecode &&
                top_k <= kMaxTopK && router_logits.size(1) - 1 <= 32 * kMaxExpertsPerLane &&
                H % elems == 0 && I % elems == 0 && Is % elems == 0 && h.stride[0] % 8 == 0 &&
                aligned16(h.data);
    for (const WeightView* v : w) fits = fits && aligned16(v->w.data);
    if (!fits) return false;
    if (fp8) return h.dtype == DType::BF16 && Fp8Weights::fits(w);
    if (grouped)
        return h.dtype == DType::BF16 &&
               with_grouped(experts_gate_up, [&](auto format) { return decltype(format)::fits(w); });
    return true;
}

void moe_block_decode(const ExecContext& ctx, const TensorView& h, const TensorView& router_logits,
                      int64_t top_k, const WeightView& experts_gate_up,
                      const WeightView& experts_down, const WeightView& shared_gate_up,
                      const WeightView& shared_down, const TensorView& y, int64_t first_expert) {
    require(
        moe_block_decode_fits(h, router_logits, top_k, experts_gate_up, experts_down,
                              shared_gate_up, shared_down),
        "moe_block: the decode route needs the route table's moe_block decision to give it T * "
        "top_k pairs (", h.size(0) * top_k, "), top_k <= ", kMaxTopK,
        ", E <= ", 32 * kMaxExpertsPerLane,
        ", 16-byte aligned rows, H, I, Is multiples of 8 (fp8: 16, all four weights fp8 with one "
        "block size, block_cols % 16 == 0 and BF16 h; groupwise: 16 for w8 and 32 for q4, all "
        "four of one width and scale dtype, groups of whole 16-byte loads and BF16 h)");
    if (experts_gate_up.is_quantized())
        require(h.dtype == DType::BF16 && y.dtype == DType::BF16,
                "moe_block: fp8 and groupwise weights take BF16 h and y");
    if (experts_gate_up.is_fp8())
        return launch<Fp8Weights>(ctx, h, router_logits, int(top_k), experts_gate_up, experts_down,
                                  shared_gate_up, shared_down, y, first_expert);
    if (experts_gate_up.is_grouped())
        return with_grouped(experts_gate_up, [&](auto format) {
            launch<decltype(format)>(ctx, h, router_logits, int(top_k), experts_gate_up,
                                     experts_down, shared_gate_up, shared_down, y, first_expert);
        });
    dispatch_float(h.dtype, "moe_block", [&](auto tag) {
        launch<DenseWeights<decltype(tag)>>(ctx, h, router_logits, int(top_k), experts_gate_up,
                                            experts_down, shared_gate_up, shared_down, y,
                                            first_expert);
    });
}

} // namespace ninfer::ops::cuda
