// The top-k route of one token in one warp, shared by moe_route (moe.cu) and the fused decode
// block (moe_decode.cu), so that both choose the same experts with bit-identical weights.
#pragma once

#include <cfloat>
#include <climits>

#include "ops/cuda/cuda_common.cuh"

namespace ninfer::ops::cuda {

// One warp's route of one token: p = softmax_f32(logits[0, E)), then `rounds` rounds each take
// the largest remaining p, the lower id on ties. Lane j < rounds gets round j's id and p / sum.
// kPerLane >= E / 32 logits per lane (8 for E <= 256: 16 registers fewer than 16).
struct WarpRoute {
    int id;
    float p;
};
// kL2Only reads the logits from L2 (ld.global.cg), never from a stale L1 line: moe_down_kernel's
// early route reads them before its dependency wait.
template <int kPerLane, bool kL2Only = false>
__device__ WarpRoute route_warp(const float* logits, int E, int rounds) {
    const int lane = threadIdx.x & 31;
    float p[kPerLane];
    float max_logit = -FLT_MAX;
#pragma unroll
    for (int m = 0; m < kPerLane; ++m) {
        const int e = lane + 32 * m;
        p[m] = e < E ? (kL2Only ? __ldcg(logits + e) : logits[e]) : -FLT_MAX;
        max_logit = fmaxf(max_logit, p[m]);
    }
    max_logit = warp_max(max_logit);
    float sum = 0.0f;
#pragma unroll
    for (int m = 0; m < kPerLane; ++m) {
        const int e = lane + 32 * m;
        p[m] = e < E ? __expf(p[m] - max_logit) : -1.0f; // -1: padding, below every p >= 0
        sum += e < E ? p[m] : 0.0f;
    }
    sum = warp_sum(sum);
    WarpRoute r{0, 0.0f};
    for (int j = 0; j < rounds; ++j) {
        // p >= 0 orders like its bit pattern as an int and -1.0f is a negative int, so one
        // warp-wide integer max finds the best p, and an integer min the lowest id holding it.
        int local = INT_MIN;
#pragma unroll
        for (int m = 0; m < kPerLane; ++m) local = max(local, __float_as_int(p[m]));
        const int best = __reduce_max_sync(0xffffffffu, local);
        int candidate = INT_MAX;
#pragma unroll
        for (int m = kPerLane - 1; m >= 0; --m)
            if (__float_as_int(p[m]) == best) candidate = lane + 32 * m;
        const int best_id = __reduce_min_sync(0xffffffffu, candidate);
#pragma unroll
        for (int m = 0; m < kPerLane; ++m)
            if (lane + 32 * m == best_id) p[m] = -1.0f; // taken
        if (lane == j) r = {best_id, __int_as_float(best) / sum};
    }
    return r;
}

// The id of expert e in a stack holding [first, first + held), or -1 (another rank's).
__device__ __forceinline__ int held_id(int e, int first, int held) {
    const int local = e - first;
    return local >= 0 && local < held ? local : -1;
}

// Lanes < k store the route: weights renormalised over the k chosen (summed in round order), and
// ids as held_id (ops/moe.h: expert parallelism). Every lane of the warp must call it (it
// shuffles).
__device__ __forceinline__ void store_route(const WarpRoute& r, int k, float* weights,
                                            int32_t* ids, int first, int held) {
    const int lane = threadIdx.x & 31;
    float total = 0.0f;
    for (int m = 0; m < k; ++m) total += __shfl_sync(0xffffffffu, r.p, m);
    if (lane < k) {
        weights[lane] = r.p / total;
        ids[lane] = held_id(r.id, first, held);
    }
}

} // namespace ninfer::ops::cuda
