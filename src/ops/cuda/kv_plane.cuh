// Device pieces of the quantized KV cache planes (ops/kv_cache.h) that the CUDA attention kernels
// share: the encode of one (token, kv head) row held by a warp (kv_cache_write, attention_prep)
// and the decode of staged codes (decode attention, flash prefill). Both go through the plane's
// codec (ops/kv_codec.h): encode_row calls its scale_for / scale_value / encode as they are, and
// decode8 computes exactly Codec::decode(code, s) for 8 codes at a time (code_values8: the
// codes' values, which a reader may multiply by the scale after summing them).
// A plane pair as kernels take it: codes [rows, D] and scales [rows, G], contiguous, where
// row = (block * bs + offset) * nKV + kv head (the [NB, bs, nKV, *] index of a token's head).
// Included by .cu files only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/kv_cache.h"
#include "ops/kv_codec.h"

namespace ninfer::ops::cuda::kvq {

constexpr int kRowDims = 256; // a row held by a warp: 32 lanes x 8 dims
// Scales per row at most: the finest codec's groups (Int8G64: 64 dims), which sizes the kernels'
// shared scale arrays.
constexpr int kMaxScales = kRowDims / kv::Int8G64::kGroup;

template <typename Codec> struct CodedPlanes {
    typename Codec::Code *k, *v;              // [rows, D]
    typename Codec::Scale *k_scale, *v_scale; // [rows, G]
};

template <typename Codec> CodedPlanes<Codec> coded_planes(const KvPlane& k, const KvPlane& v) {
    using Code = typename Codec::Code;
    using Scale = typename Codec::Scale;
    return {static_cast<Code*>(k.data.data), static_cast<Code*>(v.data.data),
            static_cast<Scale*>(k.scale.data), static_cast<Scale*>(v.scale.data)};
}

// Calls fn(Codec{}) with the codec of a quantized plane.
template <typename Fn> void dispatch_codec(const KvPlane& plane, const char* op, Fn&& fn) {
    switch (plane.dtype()) {
    case KvDtype::Int8:
        return fn(kv::Int8G64{});
    case KvDtype::Fp8:
        return fn(kv::Fp8PerHead{});
    case KvDtype::Activation:
        break;
    }
    fail(ErrorCategory::Internal, op, ": the plane is not quantized");
}

// The row shapes the kernels of this header take: D <= kRowDims, and each scale group either the
// whole row or a power-of-two number of 16-dim chunks (Int8G64: 64 dims), so a group is a
// power-of-two run of lanes for encode_row and a 16-code load never straddles two groups.
template <typename Codec> bool shape_fits(int64_t D) {
    const int gs = Codec::group_size(int(D));
    return D <= kRowDims &&
           (Codec::groups(int(D)) == 1 || (gs % 16 == 0 && ((gs / 8) & (gs / 8 - 1)) == 0));
}

// The scale group of dim d < D (compile-time arithmetic for both codecs once inlined: a
// per-row codec has one group, Int8G64 divides by 64).
template <typename Codec> __device__ __forceinline__ int group_of(int d, int D) {
    return Codec::groups(D) == 1 ? 0 : d / Codec::group_size(D);
}

// The raw scales of one (row, group) of K and V, loaded while other work runs and stored to
// shared memory later (a load completes in the background until its register is read).
template <typename Codec> struct RowScales {
    typename Codec::Scale k{}, v{}; // zero: a row that is not staged decodes to zeros
};

// Encodes one row held by the warp (every lane calls it): lane l's x are dims [8 l, 8 l + 8) as
// floats (zeros past D). A group's amax is reduced over its lanes with xor shuffles (a group
// starts at a multiple of its lane count, a power of two; a one-group codec reduces over the
// warp, whose lanes past D add zeros). fmaxf drops NaN, so a NaN element poisons its group's
// scale through a separate flag, as the codec requires (and the CPU encoder does). The lane that
// starts a group writes its scale; codes go out 8 bytes at a time when aligned.
template <typename Codec>
__device__ void encode_row(const float (&x)[8], int D, int lane, typename Codec::Code* codes,
                           typename Codec::Scale* scales) {
    using Code = typename Codec::Code;
    const int gs = Codec::group_size(D);
    int width = 1; // lanes of one group, rounded up to a power of two, at most the warp
    while (width < 32 && width * 8 < gs) width <<= 1;
    float amax = 0.0f;
    int nan = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        amax = fmaxf(amax, fabsf(x[e]));
        nan |= isnan(x[e]) ? 1 : 0;
    }
    for (int o = 1; o < width; o <<= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        nan |= __shfl_xor_sync(0xffffffffu, nan, o);
    }
    if (nan) amax = __int_as_float(0x7fffffff);
    const typename Codec::Scale stored = Codec::scale_for(amax);
    const float s = Codec::scale_value(stored);
    const int d0 = lane * 8;
    if (d0 < D && d0 % gs == 0) scales[d0 / gs] = stored;
    Code c[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) c[e] = Codec::encode(x[e], s);
    if (d0 + 8 <= D && reinterpret_cast<uintptr_t>(codes + d0) % 8 == 0) {
        uint32_t w[2] = {0, 0};
#pragma unroll
        for (int e = 0; e < 8; ++e) // memory order: code d0 + e is byte e
            w[e / 4] |= uint32_t(static_cast<uint8_t>(c[e])) << (8 * (e % 4));
        *reinterpret_cast<uint2*>(codes + d0) = make_uint2(w[0], w[1]);
    } else {
        for (int e = 0; e < 8 && d0 + e < D; ++e) codes[d0 + e] = c[e];
    }
}

// The code values of 8 codes (8 bytes in memory order): Codec::decode(code, 1), so that
// decode(code, s) = value * s exactly (both codecs decode as a code value times the scale).
// Computed for throughput (the decode kernel converts every staged code once per query head:
// a conversion-unit op per code would bound it).
//   Int8G64: float(c) from integer ops instead of I2F (1/8 of the FMA rate on sm_90): the byte
//   c ^ 0x80 = c + 128 becomes the low mantissa byte of 2^23, which is the float 2^23 + c + 128
//   exactly; subtracting 2^23 + 128 leaves c exactly.
//   Fp8PerHead: its decode's conversions (e4m3 -> f16 -> f32, exact), two codes per cvt.
template <typename Codec> __device__ __forceinline__ void code_values8(uint2 raw, float (&v)[8]) {
    const uint32_t words[2] = {raw.x, raw.y};
    if constexpr (std::is_same_v<Codec, kv::Int8G64>) {
#pragma unroll
        for (int w = 0; w < 2; ++w) {
            const uint32_t biased = words[w] ^ 0x80808080u;
#pragma unroll
            for (int i = 0; i < 4; ++i)
                v[4 * w + i] =
                    __uint_as_float(__byte_perm(biased, 0x4b000000u, 0x7650u + i)) - 8388736.0f;
        }
    } else {
        static_assert(std::is_same_v<Codec, kv::Fp8PerHead>, "code_values8: unknown codec");
#pragma unroll
        for (int w = 0; w < 2; ++w) {
            fp8x2_to_float(words[w], v[4 * w], v[4 * w + 1]);
            fp8x2_to_float(words[w] >> 16, v[4 * w + 2], v[4 * w + 3]);
        }
    }
}

// The values of 8 codes of one group with scale value s: exactly Codec::decode(code, s) each.
template <typename Codec>
__device__ __forceinline__ void decode8(uint2 raw, float s, float (&v)[8]) {
    code_values8<Codec>(raw, v);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] *= s;
}

} // namespace ninfer::ops::cuda::kvq
