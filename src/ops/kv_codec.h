// The storage codecs of a paged KV cache plane (ops/kv_cache.h), for host and device code alike.
// This header is the one declaration of each plane's storage type: the paged write (the
// producer: kv_cache_write, attention_prep) and every reader (decode attention, flash prefill,
// the CPU reference) take the codec as a type and use only its Code, Scale, encode and decode,
// so a producer and a consumer of one plane cannot disagree on its layout or its rounding.
//
// A plane is [NB, bs, nKV, D] codes plus, for a quantized codec, [NB, bs, nKV, G] scales: one
// scale per group of group_size(D) consecutive dims of one (token, kv head) row, G = groups(D)
// (the last group may be partial). For group g with amax = max |x[d]| over its dims:
//   s = Codec::scale_for(amax)               (stored as Scale; s = Codec::scale_value(stored))
//   code[d] = Codec::encode(x[d], s)         value[d] = Codec::decode(code[d], s)
// with IEEE division and round-to-nearest-even on both sides, so the CPU and CUDA write
// identical codes for identical inputs.
//   Int8G64    (--kv-dtype int8): int8 codes in [-127, 127], an f16 scale per 64 dims
//              (the seeds' int8-g64); s = f16(amax / 127), code = clamp(rint(x / s)).
//   Fp8PerHead (--kv-dtype fp8): e4m3 codes, one f32 scale per (token, head) row;
//              s = amax / 448, code = e4m3_satfinite(x / s).
// An all-zero group has s = 0 and zero codes; a non-finite x makes the scale non-finite, and
// every value of its group decodes to NaN (never a silently finite result).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

namespace ninfer::ops::kv {

struct Int8G64 {
    using Code = int8_t;
    using Scale = uint16_t; // IEEE binary16 bits
    static constexpr DType kCodeDtype = DType::I8;
    static constexpr DType kScaleDtype = DType::F16;
    static constexpr int kGroup = 64;
    NINFER_HD static int group_size(int /*D*/) { return kGroup; }
    NINFER_HD static int groups(int D) { return (D + kGroup - 1) / kGroup; }
    NINFER_HD static Scale scale_for(float amax) { return float_to_f16(amax / 127.0f); }
    NINFER_HD static float scale_value(Scale s) { return f16_to_float(s); }
    NINFER_HD static Code encode(float x, float s) {
        const float q = x / s;
        if (!(q == q)) return 0; // 0 / 0 (an all-zero group) or a non-finite scale
        const float r = rintf(q < -127.0f ? -127.0f : q > 127.0f ? 127.0f : q);
        return Code(r);
    }
    NINFER_HD static float decode(Code c, float s) { return float(c) * s; }
};

struct Fp8PerHead {
    using Code = uint8_t; // float8_e4m3fn bits
    using Scale = float;
    static constexpr DType kCodeDtype = DType::F8E4M3;
    static constexpr DType kScaleDtype = DType::F32;
    NINFER_HD static int group_size(int D) { return D; }
    NINFER_HD static int groups(int /*D*/) { return 1; }
    NINFER_HD static Scale scale_for(float amax) { return amax / 448.0f; }
    NINFER_HD static float scale_value(Scale s) { return s; }
    NINFER_HD static Code encode(float x, float s) {
        const float q = x / s;
        if (!(q == q)) return 0;
#if defined(__CUDA_ARCH__)
        return Code(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
#else
        return float_to_fp8_e4m3(q);
#endif
    }
    NINFER_HD static float decode(Code c, float s) {
#if defined(__CUDA_ARCH__)
        return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3))) * s;
#else
        return fp8_e4m3_to_float(c) * s;
#endif
    }
};

} // namespace ninfer::ops::kv
