// Block-wise fp8 weights for the CUDA tests (label cuda): random host codes and scales in the
// layout of ops/weight.h, their exact dequantization (the CPU reference's weight: e4m3(code) *
// scale, the f32 product, exact), the buggy dequantizations the negative controls model, and the
// device copy the ops take.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/fp8.h"
#include "ops/weight.h"

namespace ninfer::test {

inline int64_t fp8_blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
}

enum class Fp8Codes {
    Normal,  // e4m3 of N(0, 64^2) samples: weight-like, mostly normal codes
    AnyByte, // every byte but the NaN codes 0x7f / 0xff: subnormals and +-448 included
    WithNan, // every byte, NaN codes included
};

// How the host dequantizes: correctly, or with one of the bugs the negative controls model.
enum class Dequant {
    Exact,
    UpScaleRowFromI, // gate_up stacks: row n >= N / 2 takes scale row (n - N / 2) / Br
    NoScale,         // the codes alone
};

// A host fp8 weight [.., N, K]: codes, F32 scales [.., ceil(N / br), ceil(K / bc)] uniform in
// [scale_lo, scale_hi].
struct HostFp8 {
    Tensor codes, scale;
    int64_t br = 0, bc = 0;

    HostFp8(const std::vector<int64_t>& dims, int64_t block_rows, int64_t block_cols, uint64_t seed,
            Fp8Codes kind, float scale_lo, float scale_hi)
        : br(block_rows), bc(block_cols) {
        const int nd = int(dims.size());
        std::vector<int64_t> sdims = dims;
        sdims[size_t(nd - 2)] = fp8_blocks(dims[size_t(nd - 2)], br);
        sdims[size_t(nd - 1)] = fp8_blocks(dims[size_t(nd - 1)], bc);
        codes = Tensor::empty(cpu_allocator(), DType::F8E4M3, dims.data(), nd);
        scale = Tensor::empty(cpu_allocator(), DType::F32, sdims.data(), nd);
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<float> scale_dist(scale_lo, scale_hi);
        float* s = scale.ptr<float>();
        for (int64_t i = 0; i < scale.numel(); ++i) s[i] = scale_dist(rng);
        std::normal_distribution<float> normal(0.0f, 64.0f);
        uint8_t* q = codes.ptr<uint8_t>();
        for (int64_t i = 0; i < codes.numel(); ++i) {
            uint8_t b = 0;
            if (kind == Fp8Codes::Normal) {
                b = model::float_to_fp8_e4m3(normal(rng));
            } else {
                b = uint8_t(rng() & 0xff);
                if (kind == Fp8Codes::AnyByte && (b & 0x7f) == 0x7f) b = uint8_t(b - 1);
            }
            q[i] = b;
        }
    }

    // The dense F32 weight e4m3(code) * scale, or a buggy variant.
    Tensor dense(Dequant mode = Dequant::Exact) const {
        const int nd = codes.view().ndim;
        const int64_t N = codes.size(nd - 2), K = codes.size(nd - 1);
        const int64_t E = nd == 3 ? codes.size(0) : 1;
        const int64_t sr = fp8_blocks(N, br), sc = fp8_blocks(K, bc);
        float lut[256];
        for (int v = 0; v < 256; ++v) lut[v] = model::fp8_e4m3_to_float(uint8_t(v));
        Tensor d = Tensor::empty(cpu_allocator(), DType::F32, codes.view().shape.data(), nd);
        const uint8_t* q = codes.ptr<uint8_t>();
        const float* s = scale.ptr<float>();
        float* out = d.ptr<float>();
        for (int64_t e = 0; e < E; ++e)
            for (int64_t n = 0; n < N; ++n) {
                const int64_t sn = mode == Dequant::UpScaleRowFromI && n >= N / 2 ? n - N / 2 : n;
                const float* srow = s + (e * sr + sn / br) * sc;
                const int64_t row = (e * N + n) * K;
                for (int64_t k = 0; k < K; ++k)
                    out[row + k] =
                        lut[q[row + k]] * (mode == Dequant::NoScale ? 1.0f : srow[k / bc]);
            }
        return d;
    }
};

// x [T, K] (F32) as the W8A8 routes see it (linear_fp8_w8a8.cu, moe_w8a8.cu): quantized per
// (row, 128 columns) the way quantize_rows_fp8 does (s = max(amax, 1e-12) / 448, code = e4m3_rn(x / s)),
// then code * s.
inline Tensor w8a8_activations(const TensorView& x) {
    Tensor q = clone(x);
    const int64_t T = x.size(0), K = x.size(1);
    float* v = q.ptr<float>();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < K; g += 128) {
            float amax = 0.0f;
            for (int64_t k = g; k < g + 128; ++k) amax = std::max(amax, std::fabs(v[t * K + k]));
            const float scale = std::max(amax, 1e-12f) / 448.0f;
            for (int64_t k = g; k < g + 128; ++k) {
                float& e = v[t * K + k];
                e = model::fp8_e4m3_to_float(model::float_to_fp8_e4m3(e / scale)) * scale;
            }
        }
    return q;
}

// A device copy, as the ops take it.
struct DeviceFp8 {
    Tensor codes, scale;
    ops::WeightView view;
    DeviceFp8(const ops::ExecContext& ctx, const HostFp8& w)
        : codes(to_device(ctx, w.codes, DType::F8E4M3)), scale(to_device(ctx, w.scale, DType::F32)),
          view(ops::WeightView::fp8(codes, scale, w.br, w.bc)) {}
};

} // namespace ninfer::test
