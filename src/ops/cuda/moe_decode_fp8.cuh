// The block-wise fp8 weight format of the fused MoE decode route (moe_decode.cu), as the policy
// its kernels are templated on (the dense policy, DenseWeights<T>, lives there): how a weight
// row is addressed, loaded (16 bytes a lane a step) and dotted with kElems f32 activations.
//   W[.., n, k] = e4m3(q[.., n, k]) * scale[.., n / Br, k / Bc]  (ops/weight.h)
// A load is 16 codes and the scale of their block (Bc % 16 == 0 and the lane's column is a
// multiple of 16, so one scale covers them); dot() (and dot2(), for the gate and up rows at
// once) forms the 16-term partial sum in f32 (codes decoded exactly: e4m3 -> f16 -> f32) and
// multiplies it by the scale once. The scale's column k / Bc comes from a multiply-high
// (FastDiv), not a division, and is read through the read-only cache (a scale row is shared by
// Br weight rows); the codes stream evict-first.
#pragma once

#include <cstdint>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/fast_div.cuh"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/weight.h"

namespace ninfer::ops::cuda::moe_decode {

// Block-wise fp8 weights with bf16 activations (h, y).
struct Fp8Weights {
    using Act = __nv_bfloat16;
    static constexpr int kElems = 16;      // codes per lane per load: 16 bytes
    static constexpr int kDownBatch = 16;  // moe_down_kernel's steps in flight: 124 registers
    static constexpr bool kLightUp = true; // moe_up_kernel fits 5 blocks per SM (E <= 256)

    struct Raw { // one load: 16 codes and their block's scale
        uint4 codes;
        float scale;
    };
    // A 2-D weight [N, K] or a stack [E, N, K] (expert_* = 0 for 2-D).
    struct Mat {
        const uint8_t* q;      // codes, contiguous
        const float* s;        // scales [.., ceil(N / Br), ceil(K / Bc)], contiguous, < 2^32
        int64_t expert_codes;  // N * K
        int64_t expert_scales; // ceil(N / Br) * ceil(K / Bc)
        int64_t scale_cols;    // ceil(K / Bc)
        uint32_t block_rows;   // Br
        FastDiv col_block;     // k -> k / Bc
    };
    // Row n of one expert: its codes and the offset of its scale row in m.s (32 bits: the up
    // kernel holds two rows in 48 registers).
    struct Row {
        const uint8_t* q;
        uint32_t s;
    };

    static Mat mat(const WeightView& w) {
        const bool stack = w.w.ndim == 3;
        const TensorView& s = w.scale;
        return {static_cast<const uint8_t*>(w.w.data),
                s.ptr<const float>(),
                stack ? w.size(1) * w.size(2) : 0,
                stack ? s.size(1) * s.size(2) : 0,
                s.size(s.ndim - 1),
                uint32_t(w.block_rows),
                FastDiv::of(uint32_t(w.block_cols))};
    }
    // Whether the kernels take the four weights: one block size, Bc a multiple of 16, and scale
    // offsets and rows that fit in 32 bits.
    static bool fits(const WeightView* const (&w)[4]) {
        const int64_t br = w[0]->block_rows, bc = w[0]->block_cols, limit = int64_t(1) << 31;
        for (const WeightView* v : w)
            if (v->block_rows != br || v->block_cols != bc || v->scale.numel() >= 2 * limit ||
                v->size(v->w.ndim - 2) >= limit)
                return false;
        return br >= 1 && br < limit && bc >= 16 && bc % 16 == 0 && bc < limit;
    }

    // Row r (< 2^31) of expert 0 (or of a 2-D weight) with K columns.
    __device__ __forceinline__ static Row row(const Mat& m, int64_t r, int64_t K) {
        return {m.q + r * K, uint32_t(uint32_t(r) / m.block_rows * m.scale_cols)};
    }
    // The same row of expert e.
    __device__ __forceinline__ static Row expert(const Mat& m, const Row& r, int e) {
        return {r.q + int64_t(e) * m.expert_codes, uint32_t(r.s + e * m.expert_scales)};
    }
    // The 16 codes at column col (a multiple of 16) and their scale.
    __device__ __forceinline__ static Raw load(const Mat& m, const Row& r, int64_t col) {
        return {__ldcs(reinterpret_cast<const uint4*>(r.q + col)),
                __ldg(m.s + (r.s + m.col_block(uint32_t(col))))};
    }
    // (x . e4m3(codes)) * scale: the partial sum in two f32 chains, then one product.
    __device__ __forceinline__ static float dot(const float (&x)[16], const Raw& raw) {
        float w[16];
        fp8x16_to_float(raw.codes, w);
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            s0 += x[j] * w[j];
            s1 += x[8 + j] * w[8 + j];
        }
        return (s0 + s1) * raw.scale;
    }
    // sg += g . x[0, 16), su += u . x[0, 16) for bf16 activations x (read-only cache): dot()'s
    // arithmetic, in halves of 8 so that only 8 activations are live at a time.
    __device__ __forceinline__ static void dot2(const __nv_bfloat16* x, const Raw& g, const Raw& u,
                                                float& sg, float& su) {
        const uint32_t gw[4] = {g.codes.x, g.codes.y, g.codes.z, g.codes.w};
        const uint32_t uw[4] = {u.codes.x, u.codes.y, u.codes.z, u.codes.w};
        float gs[2], us[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            float xv[8];
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x) + half), xv);
            gs[half] = dot_half(xv, gw[2 * half], gw[2 * half + 1]);
            us[half] = dot_half(xv, uw[2 * half], uw[2 * half + 1]);
        }
        sg += (gs[0] + gs[1]) * g.scale;
        su += (us[0] + us[1]) * u.scale;
    }

private:
    // x[0, 8) . the 8 codes of two words, summed in order.
    __device__ __forceinline__ static float dot_half(const float (&x)[8], uint32_t w0,
                                                     uint32_t w1) {
        float w[8];
        fp8x2_to_float(w0, w[0], w[1]);
        fp8x2_to_float(w0 >> 16, w[2], w[3]);
        fp8x2_to_float(w1, w[4], w[5]);
        fp8x2_to_float(w1 >> 16, w[6], w[7]);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += x[j] * w[j];
        return sum;
    }
};

} // namespace ninfer::ops::cuda::moe_decode
