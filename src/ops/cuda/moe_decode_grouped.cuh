// The groupwise W8/Q4 weight format of the fused MoE decode route (moe_decode.cu), as the policy
// its kernels are templated on (Fp8Weights' interface, moe_decode_fp8.cuh):
//   W[.., n, k] = q[.., n, k] * scale[.., n, k / G]  (ops/weight.h, model/groupwise.h)
// A load is 16 bytes of codes (16 w8 codes or 32 q4 ones) and the scale of their group
// (G % kElems == 0 and the lane's column is a multiple of kElems, so one group covers them);
// dot() (and dot2(), for the gate and up rows at once) forms the partial sum in f32 (codes
// decoded exactly by PRMT + FADD, groupwise_codes.cuh) and multiplies it by the scale once. The scale's column
// k / G comes from FastDiv, read through the read-only cache; the codes stream evict-first.
// Without this route a groupwise MoE took the composition, which dequantizes every used
// expert to bf16 scratch each step: the 35B-A3B in q4 decoded at 47 tok/s on an H100 (bf16:
// 337).
#pragma once

#include <cstdint>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/fast_div.cuh"
#include "ops/cuda/groupwise_codes.cuh"
#include "ops/weight.h"

namespace ninfer::ops::cuda::moe_decode {

// Groupwise weights of BITS (8 or 4) with S (float or __half) scales and bf16 activations.
template <typename S, int BITS> struct GroupedWeights {
    using Act = __nv_bfloat16;
    static constexpr int kElems = kCodesPerLoad<BITS>; // codes per lane per load: 16 bytes
    static constexpr int kDownBatch = 16;              // moe_down_kernel's steps in flight
    // A q4 load is 32 codes: its up kernel takes 4 blocks per SM (64 registers), not 5.
    static constexpr bool kLightUp = BITS == 8;

    struct Raw { // one load: 16 bytes of codes and their group's scale
        uint4 codes;
        float scale;
    };
    // A 2-D weight [N, K] or a stack [E, N, K] (expert_* = 0 for 2-D).
    struct Mat {
        const uint8_t* q;      // codes [.., N, row_bytes], contiguous
        const S* s;            // scales [.., N, groups], contiguous, < 2^31 of them
        int64_t expert_bytes;  // N * row_bytes
        int64_t expert_scales; // N * groups
        int64_t row_bytes;     // K (w8) or ceil(K / 2) (q4)
        uint32_t groups;       // ceil(K / G)
        FastDiv group;         // k -> k / G
    };
    // Row n of one expert: its codes and the offset of its scale row in m.s.
    struct Row {
        const uint8_t* q;
        uint32_t s;
    };

    static Mat mat(const WeightView& w) {
        const int nd = w.w.ndim;
        const int64_t row_bytes = w.w.size(nd - 1), groups = w.scale.size(nd - 1);
        const int64_t N = w.w.size(nd - 2);
        return {static_cast<const uint8_t*>(w.w.data),
                static_cast<const S*>(w.scale.data),
                nd == 3 ? N * row_bytes : 0,
                nd == 3 ? N * groups : 0,
                row_bytes,
                uint32_t(groups),
                FastDiv::of(uint32_t(w.group_size))};
    }
    // Whether the kernels take the four weights: groupwise of this width and scale dtype, groups
    // of whole loads, and scale offsets and rows that fit in 32 bits.
    static bool fits(const WeightView* const (&w)[4]) {
        const DType sd = sizeof(S) == 2 ? DType::F16 : DType::F32;
        const int64_t limit = int64_t(1) << 31;
        for (const WeightView* v : w)
            if (!v->is_grouped() || v->group_bits != BITS || v->scale.dtype != sd ||
                v->group_size % kElems != 0 || v->group_size >= limit ||
                v->scale.numel() >= limit || v->size(v->w.ndim - 2) >= limit ||
                v->cols >= limit)
                return false;
        return true;
    }

    // Row r (< 2^31) of expert 0 (or of a 2-D weight); K is implied by the layout.
    __device__ __forceinline__ static Row row(const Mat& m, int64_t r, int64_t /*K*/) {
        return {m.q + r * m.row_bytes, uint32_t(r) * m.groups};
    }
    // The same row of expert e.
    __device__ __forceinline__ static Row expert(const Mat& m, const Row& r, int e) {
        return {r.q + int64_t(e) * m.expert_bytes, uint32_t(r.s + e * m.expert_scales)};
    }
    // The kElems codes from column col (a multiple of kElems) and their group's scale.
    __device__ __forceinline__ static Raw load(const Mat& m, const Row& r, int64_t col) {
        const int64_t byte = BITS == 8 ? col : col / 2;
        return {__ldcs(reinterpret_cast<const uint4*>(r.q + byte)),
                scale_to_float(__ldg(m.s + (r.s + m.group(uint32_t(col)))))};
    }
    // (x . codes) * scale: the partial sum in two f32 chains (alternate chunks of 8), then one
    // product.
    __device__ __forceinline__ static float dot(const float (&x)[kElems], const Raw& raw) {
        const uint32_t words[4] = {raw.codes.x, raw.codes.y, raw.codes.z, raw.codes.w};
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            float w[8];
            chunk_to_float(words, c, w);
#pragma unroll
            for (int j = 0; j < 8; ++j) s[c % 2] += x[8 * c + j] * w[j];
        }
        return (s[0] + s[1]) * raw.scale;
    }
    // sg += g . x[0, kElems), su += u . x[0, kElems) for bf16 activations x (read-only cache):
    // dot()'s arithmetic, 8 activations live at a time.
    __device__ __forceinline__ static void dot2(const __nv_bfloat16* x, const Raw& g, const Raw& u,
                                                float& sg, float& su) {
        const uint32_t gw[4] = {g.codes.x, g.codes.y, g.codes.z, g.codes.w};
        const uint32_t uw[4] = {u.codes.x, u.codes.y, u.codes.z, u.codes.w};
        float gs[2] = {0.0f, 0.0f}, us[2] = {0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            float xv[8], gv[8], uv[8];
            bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x) + c), xv);
            chunk_to_float(gw, c, gv);
            chunk_to_float(uw, c, uv);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                gs[c % 2] += xv[j] * gv[j];
                us[c % 2] += xv[j] * uv[j];
            }
        }
        sg += (gs[0] + gs[1]) * g.scale;
        su += (us[0] + us[1]) * u.scale;
    }

private:
    static constexpr int kChunks = kElems / 8; // chunks of 8 codes (one uint4 of activations)
    // Codes [8c, 8c + 8) of a load: word c (q4), words 2c and 2c + 1 (w8).
    __device__ __forceinline__ static void chunk_to_float(const uint32_t (&words)[4], int c,
                                                          float (&v)[8]) {
        if constexpr (BITS == 4) {
            word_codes_prmt<4>(words[c], v);
        } else {
            float a[4], b[4];
            word_codes_prmt<8>(words[2 * c], a);
            word_codes_prmt<8>(words[2 * c + 1], b);
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = a[j], v[4 + j] = b[j];
        }
    }
};

} // namespace ninfer::ops::cuda::moe_decode
