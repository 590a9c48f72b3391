// What the moe_experts CUDA tests share (test_cuda_moe.cpp, test_cuda_moe_wgmma.cpp): routings
// from the CPU router, and the 35B-A3B's experts through whichever grouped route the table in
// force gives them, against the FP64 reference on sampled rows.
#pragma once

#include <initializer_list>
#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/memory.h"
#include "ops/moe.h"

namespace ninfer::test {

struct Routing {
    Tensor ids, weights; // host [T, k] I32, F32
};

// The CPU router over random logits: distinct experts per token, realistic weights.
inline Routing routed(int64_t T, int64_t E, int64_t k, uint64_t seed) {
    Routing r{zeros({T, k}, DType::I32), zeros({T, k})};
    ops::moe_route(kCpuRef, random_tensor({T, E}, seed, 2.0f), k, r.weights, r.ids);
    return r;
}

// Qwen3.6-35B-A3B's experts (E = 256, k = 8, H = 2048, I = 512) in bf16 at each T. The weights
// are drawn on the device; the FP64 reference checks the first, middle and last 64 tokens (each
// token's output depends on its own row only), and every output element must be finite.
inline void expect_qwen35b_experts_on_sampled_rows(std::initializer_list<int64_t> Ts,
                                                   uint64_t seed, const std::string& what) {
    const auto c = cuda_ctx(DType::BF16);
    const int64_t E = 256, k = 8, H = 2048, I = 512, n = 64;
    Tensor gu = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {E, 2 * I, H});
    Tensor down = Tensor::empty(ops::device_allocator(c.device), DType::BF16, {E, H, I});
    ops::fill_random(c, gu, seed, 0.0f, 0.02f);
    ops::fill_random(c, down, seed + 1, 0.0f, 0.02f);
    const Tensor h_gu = to_host(c, gu), h_down = to_host(c, down);
    for (int64_t T : Ts) {
        const Routing r = routed(T, E, k, seed + 2);
        Tensor x = rounded(random_tensor({T, H}, seed + 3), DType::BF16);
        Tensor y0 = rounded(random_tensor({T, H}, seed + 4), DType::BF16);
        Tensor dy = to_device(c, y0, DType::BF16);
        ops::moe_experts(c, to_device(c, x, DType::BF16), gu, down, to_device(c, r.ids, DType::I32),
                         to_device(c, r.weights, DType::F32), dy);
        const Tensor got = to_host(c, dy);
        EXPECT_TRUE(all_finite(got, H)) << what << " T=" << T;
        for (int64_t begin : {int64_t(0), (T / 2) / n * n, T - n}) {
            Tensor ref = clone(rows(y0, begin, n));
            ops::moe_experts(kCpuRef, rows(x, begin, n), h_gu, h_down, rows(r.ids, begin, n),
                             rows(r.weights, begin, n), ref);
            EXPECT_TRUE(near(rows(got, begin, n), ref, kBf16Reduction))
                << what << " T=" << T << " rows from " << begin;
        }
    }
}

} // namespace ninfer::test
