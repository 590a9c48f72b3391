// ExecContext::cpu_w8a8, the CPU's emulation of CUDA's W8A8 routes for block-wise fp8 weights
// (`--fp8-weights w8a8`, tools/quality.py's fp8_w8a8 variant):
//   - cpu::quantize_rows_e4m3 by hand: each block's amax lands on 448 * s exactly, zeros stay
//     zero, a short last block has its own scale, values between grid points round to nearest;
//   - ops::linear on an fp8 weight: the dense product of the quantized rows and the dequantized
//     weight (Reference and Fast), and not the weight-only product (the flag acts);
//   - ops::moe_block on fp8 stacks: the Reference against an FP64 pipeline written here from the
//     W8A8 route's contract (moe_w8a8.h: x quantized per row, the GEMMs' rows in bf16, SwiGLU in
//     f32 quantized again; the shared expert through the quantized linear), and Fast closer to it
//     than the weight-only block is (a rare rounding flip between f32 and FP64 SwiGLU values keeps
//     Fast off an exact preset).
#include <cmath>

#include "core/dtype.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/op_test_util.h"

namespace ninfer::test {
namespace {

constexpr int64_t kBlock = 128; // the official checkpoints' scale block

ops::ExecContext w8a8(ops::ExecContext c) {
    c.cpu_w8a8 = true;
    return c;
}

// A block-wise fp8 weight [rows, cols] (or a stack [E, rows, cols]) on the host: random codes and
// scales per 128 x 128 block, and the same weight dequantized (code * scale, exact in f32).
struct Fp8Host {
    Tensor codes, scale, dense;
    ops::WeightView view;
    Fp8Host(int64_t E, int64_t rows, int64_t cols, uint64_t seed, float magnitude) {
        const int64_t rb = (rows + kBlock - 1) / kBlock, cb = (cols + kBlock - 1) / kBlock;
        const int64_t stack = E > 0 ? E : 1;
        const Tensor values = random_tensor({stack * rows * cols}, seed, 64.0f);
        const Tensor scales = random_tensor({stack * rb * cb}, seed + 1, 1.0f);
        codes = E > 0 ? zeros({E, rows, cols}, DType::F8E4M3) : zeros({rows, cols}, DType::F8E4M3);
        scale = E > 0 ? zeros({E, rb, cb}) : zeros({rb, cb});
        dense = E > 0 ? zeros({E, rows, cols}) : zeros({rows, cols});
        for (int64_t i = 0; i < stack * rb * cb; ++i)
            scale.ptr<float>()[i] = magnitude / 64.0f * (1.0f + 0.5f * std::fabs(scales.ptr<float>()[i]));
        for (int64_t e = 0; e < stack; ++e)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c) {
                    const int64_t i = (e * rows + r) * cols + c;
                    const uint8_t code = float_to_fp8_e4m3(values.ptr<float>()[i]);
                    codes.ptr<uint8_t>()[i] = code;
                    dense.ptr<float>()[i] = fp8_e4m3_to_float(code) *
                                            scale.ptr<float>()[(e * rb + r / kBlock) * cb + c / kBlock];
                }
        view = ops::WeightView::fp8(codes, scale, kBlock, kBlock);
    }
};

// The rows of x as the W8A8 routes see them (cpu::quantize_rows_e4m3 on a copy).
Tensor quantized(const TensorView& x) {
    Tensor q = clone(x);
    ops::cpu::quantize_rows_e4m3(q.ptr<float>(), q.size(0), q.size(1), q.size(1), kBlock);
    return q;
}

TEST(W8a8Emulation, QuantizeRowsByHand) {
    // One row of 130 columns: a block of 128 and a short block of 2.
    Tensor x = zeros({1, 130});
    float* v = x.ptr<float>();
    v[0] = 2.0f;     // the first block's amax: s = 2 / 448, exact on the grid
    v[1] = -1.0f;    // 224 s: on the grid (224 = 1.75 * 2^7)
    v[2] = 0.0f;     // stays 0
    v[3] = 1.1f;     // 246.4 s: between 240 and 256 (spacing 16 there), rounds to 240
    v[128] = -3.0f;  // the short block's amax: s = 3 / 448
    v[129] = 0.01f;  // 1.4933 s: between 1.375 and 1.5 (spacing 0.125), rounds to 1.5
    ops::cpu::quantize_rows_e4m3(v, 1, 130, 130, kBlock);
    const float s0 = 2.0f / 448.0f, s1 = 3.0f / 448.0f;
    EXPECT_FLOAT_EQ(v[0], 448.0f * s0);
    EXPECT_FLOAT_EQ(v[1], -224.0f * s0);
    EXPECT_EQ(v[2], 0.0f);
    EXPECT_FLOAT_EQ(v[3], 240.0f * s0);
    EXPECT_FLOAT_EQ(v[128], -448.0f * s1);
    EXPECT_FLOAT_EQ(v[129], 1.5f * s1);
    // An all-zero block keeps its zeros (scale 1e-12 / 448, never a division by zero).
    Tensor z = zeros({2, 128});
    ops::cpu::quantize_rows_e4m3(z.ptr<float>(), 2, 128, 128, kBlock);
    EXPECT_TRUE(near(z, zeros({2, 128}), kExact));
}

TEST(W8a8Emulation, LinearQuantizesItsRows) {
    const int64_t N = 96, K = 300; // K: two whole blocks and a short one
    const Fp8Host w(0, N, K, 31, 0.05f);
    for (const ops::ExecContext& base : {kRef, kFast}) {
        const Tensor x = random_tensor({7, K}, 32);
        Tensor got = zeros({7, N}), want = zeros({7, N}), plain = zeros({7, N});
        ops::linear(w8a8(base), x, w.view, got);
        ops::linear(kRef, quantized(x), w.dense, want);
        ops::linear(base, x, w.view, plain);
        EXPECT_TRUE(near(got, want, kReductionF32)) << "ref=" << base.reference();
        EXPECT_FALSE(near(plain, want, kReductionF32)) << "the flag changed nothing";
        // Dense weights are not fp8 projections: the flag leaves them alone.
        Tensor dense_got = zeros({7, N}), dense_want = zeros({7, N});
        ops::linear(w8a8(base), x, w.dense, dense_got);
        ops::linear(base, x, w.dense, dense_want);
        EXPECT_TRUE(near(dense_got, dense_want, kExact));
    }
}

double silu(double v) {
    return v / (1.0 + std::exp(-v));
}

// moe_block's W8A8 contract in FP64 over dequantized weights: routed experts on x's quantized row
// (the gate/up and down rows rounded to bf16 as the route's GEMMs write them; SwiGLU formed in
// FP64, rounded to f32 and quantized), the shared expert through the quantized linear of x and of
// its f32 SwiGLU row.
Tensor w8a8_block_reference(const Tensor& h, const Tensor& logits, int64_t k, const Fp8Host& egu,
                            const Fp8Host& edn, const Fp8Host& sgu, const Fp8Host& sdn,
                            const Tensor& y0) {
    const int64_t T = h.size(0), H = h.size(1), E = egu.dense.size(0), I = edn.dense.size(2);
    const int64_t Is = sdn.dense.size(1);
    Tensor w = zeros({T, k}), ids = zeros({T, k}, DType::I32);
    ops::moe_route(kRef, logits.view().narrow(1, 0, E), k, w, ids);
    const Tensor hq = quantized(h);
    Tensor y = clone(y0);
    std::vector<float> act(I);
    for (int64_t t = 0; t < T; ++t) {
        const float* xr = hq.ptr<float>() + t * H;
        std::vector<double> sum(H, 0.0);
        for (int64_t j = 0; j < k; ++j) {
            const int64_t e = ids.ptr<int32_t>()[t * k + j];
            const float* gu = egu.dense.ptr<float>() + e * 2 * I * H;
            for (int64_t i = 0; i < I; ++i) {
                double g = 0, u = 0;
                for (int64_t c = 0; c < H; ++c) {
                    g += double(gu[i * H + c]) * xr[c];
                    u += double(gu[(I + i) * H + c]) * xr[c];
                }
                g = bf16_to_float(float_to_bf16(float(g)));
                u = bf16_to_float(float_to_bf16(float(u)));
                act[i] = float(silu(g) * u);
            }
            ops::cpu::quantize_rows_e4m3(act.data(), 1, I, I, kBlock);
            const float* dn = edn.dense.ptr<float>() + e * H * I;
            for (int64_t c = 0; c < H; ++c) {
                double o = 0;
                for (int64_t i = 0; i < I; ++i) o += double(dn[c * I + i]) * act[i];
                sum[c] += double(w.ptr<float>()[t * k + j]) *
                          double(bf16_to_float(float_to_bf16(float(o))));
            }
        }
        float* yr = y.ptr<float>() + t * H;
        for (int64_t c = 0; c < H; ++c) yr[c] = float(double(yr[c]) + sum[c]);
    }
    Tensor gate_up = zeros({T, 2 * Is}), shared_act = zeros({T, Is}), shared = zeros({T, H});
    ops::linear(kRef, hq, sgu.dense, gate_up);
    ops::silu_mul(kRef, gate_up, shared_act);
    ops::linear(kRef, quantized(shared_act), sdn.dense, shared);
    ops::add_sigmoid_scaled(kRef, logits.view().narrow(1, E, 1), shared, y);
    return y;
}

TEST(W8a8Emulation, MoeBlockQuantizesExpertRowsAndSwigluRows) {
    const int64_t E = 8, k = 2, H = 256, I = 128, Is = 128, T = 9;
    const Fp8Host egu(E, 2 * I, H, 41, 1.0f / 16), edn(E, H, I, 43, 1.0f / 11);
    const Fp8Host sgu(0, 2 * Is, H, 45, 1.0f / 16), sdn(0, H, Is, 47, 1.0f / 11);
    const Tensor h = random_tensor({T, H}, 50), logits = random_tensor({T, E + 1}, 51, 2.0f);
    const Tensor y0 = random_tensor({T, H}, 52);
    const Tensor want = w8a8_block_reference(h, logits, k, egu, edn, sgu, sdn, y0);
    auto block = [&](const ops::ExecContext& c) {
        Tensor y = clone(y0);
        ops::moe_block(c, h, logits, k, egu.view, edn.view, sgu.view, sdn.view, y);
        return y;
    };
    const Tensor ref = block(w8a8(kRef)), fast = block(w8a8(kFast)), plain = block(kRef);
    EXPECT_TRUE(near(ref, want, kReductionF32));
    EXPECT_FALSE(near(plain, want, kReductionF32)) << "the flag changed nothing";
    // Fast: nearer the W8A8 contract than the weight-only block is, by far.
    auto gap = [&](const Tensor& a) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < want.numel(); ++i) {
            const double d = double(a.ptr<float>()[i]) - double(want.ptr<float>()[i]);
            num += d * d;
            den += double(want.ptr<float>()[i]) * want.ptr<float>()[i];
        }
        return std::sqrt(num / den);
    };
    EXPECT_LT(gap(fast), 0.1 * gap(plain)) << gap(fast) << " against " << gap(plain);
}

} // namespace
} // namespace ninfer::test
