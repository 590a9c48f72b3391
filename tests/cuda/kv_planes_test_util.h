// A layer's K and V planes for the CUDA attention tests (test_cuda_kv_quant,
// test_cuda_portable_routes): bf16 values, or quantized codes with their scales, on the host or
// the device, made the same way on both sides of a comparison.
#pragma once

#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/attention_test_util.h"
#include "ops/kv_cache.h"

namespace ninfer::test {

struct Planes {
    Tensor k, v, k_scale, v_scale; // scales empty: bf16 planes
    bool quantized() const { return !k_scale.view().empty(); }
    ops::KvPlane kp() const {
        return quantized() ? ops::KvPlane::quantized(k, k_scale) : ops::KvPlane(k);
    }
    ops::KvPlane vp() const {
        return quantized() ? ops::KvPlane::quantized(v, v_scale) : ops::KvPlane(v);
    }
    std::vector<const Tensor*> all() const { return {&k, &v, &k_scale, &v_scale}; }
};

// Host planes [NB, kBlock, nKV, D]: for KvDtype::Activation random bf16 values, else random codes
// (no fp8 NaN codes) and random finite scales (what a batch does not write must keep them).
inline Planes host_planes(ops::KvDtype kv, int64_t NB, int64_t nKV, int64_t D, uint64_t seed) {
    if (kv == ops::KvDtype::Activation)
        return {rounded(random_tensor({NB, kBlock, nKV, D}, seed, 1.0f), DType::BF16),
                rounded(random_tensor({NB, kBlock, nKV, D}, seed + 1, 1.0f), DType::BF16),
                {},
                {}};
    const DType code = ops::kv_code_dtype(kv, DType::F32), scale = ops::kv_scale_dtype(kv);
    const int64_t G = ops::kv_scale_groups(kv, D);
    Planes p{zeros({NB, kBlock, nKV, D}, code), zeros({NB, kBlock, nKV, D}, code),
             zeros({NB, kBlock, nKV, G}, scale), zeros({NB, kBlock, nKV, G}, scale)};
    std::mt19937_64 gen(seed);
    for (const Tensor* t : {&p.k, &p.v})
        for (int64_t i = 0; i < t->numel(); ++i) {
            const uint8_t b = uint8_t(gen());
            t->ptr<uint8_t>()[i] = (b & 0x7f) == 0x7f ? uint8_t(b & 0xfe) : b;
        }
    std::uniform_real_distribution<float> s(1e-3f, 5e-2f);
    for (const Tensor* t : {&p.k_scale, &p.v_scale})
        for (int64_t i = 0; i < t->numel(); ++i) {
            if (scale == DType::F16)
                t->ptr<uint16_t>()[i] = float_to_f16(s(gen));
            else
                t->ptr<float>()[i] = s(gen);
        }
    return p;
}

// Device copies: codes and scales byte for byte (they keep their dtypes), bf16 planes in bf16
// (their host values are bf16 already).
inline Planes planes_to_device(const ops::ExecContext& c, const Planes& h) {
    if (!h.quantized())
        return {to_device(c, h.k, DType::BF16), to_device(c, h.v, DType::BF16), {}, {}};
    auto dev = [&](const Tensor& t) { return to_device(c, t, t.view().dtype); };
    return {dev(h.k), dev(h.v), dev(h.k_scale), dev(h.v_scale)};
}

} // namespace ninfer::test
