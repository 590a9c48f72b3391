// The fp8 weight routes on CUDA against bf16 at the real Qwen3.6 shapes, one JSON line per case
// (milliseconds per call, median of reps; TFLOP/s of the useful FLOPs), all measured in one run
// so the routes compare as ratios:
//   linear: the fp8 GEMV (to 8 rows), the fp8 tensor-core GEMM (linear_tc_fp8), W8A8 on
//     cuBLASLt (linear_w8a8, activation quantization included), dequantize + cuBLAS and bf16's
//     best route on a bf16 weight, at T rows;
//   moe_block (35B-A3B: E = 256, top-8, H = 2048, I = Is = 512): the fused fp8 decode route where
//     it fits, the composition with the grouped route's kernels (moe_experts.fp8: mma.sync tiles
//     on bf16 activations, the W8A8 wgmma grouped GEMM on sm_90) each forced, and bf16's best
//     route.
// Used to set linear_fp8's and moe_block's route limits.
//   bench_fp8_ops [reps] [linear|moe]
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/cuda/moe_w8a8.h"
#include "ops/moe.h"
#include "ops/route_table.h"

namespace {

using namespace ninfer;

ops::ExecContext ctx;

Tensor dev(DType dt, std::vector<int64_t> shape, uint64_t seed, float stddev = 1.0f) {
    return bench::random_tensor(ctx, dt, shape, seed, stddev);
}

// 10 back-to-back calls per timing: the fp8 routes' microsecond kernels.
double time_ms(const std::function<void()>& body, int reps) {
    return bench::time_ms(ctx, body, reps, 10);
}

void report(const std::string& name, double ms, double flops) {
    std::printf("{\"op\": \"%s\", \"ms\": %.4f, \"tflops\": %.1f}\n", name.c_str(), ms,
                flops / ms / 1e9);
    std::fflush(stdout);
}

// A random block-wise fp8 weight [.., N, K] (codes ~ N(0, 64), scales 0.02 / 64).
struct Fp8Weight {
    Tensor q, s;
    ops::WeightView view;
    Fp8Weight(int64_t N, int64_t K, uint64_t seed, int64_t E = 0) {
        Allocator& a = ops::device_allocator(ctx.device);
        const int64_t sN = (N + 127) / 128, sK = (K + 127) / 128;
        q = E ? Tensor::empty(a, DType::F8E4M3, {E, N, K}) : Tensor::empty(a, DType::F8E4M3, {N, K});
        s = E ? Tensor::empty(a, DType::F32, {E, sN, sK}) : Tensor::empty(a, DType::F32, {sN, sK});
        ops::fill_random(ctx, q, seed, 0.0f, 64.0f);
        ops::fill_random(ctx, s, seed + 1, 0.02f / 64.0f, 0.0f);
        view = ops::WeightView::fp8(q, s, 128, 128);
    }
};

void linear_routes(const std::string& what, int64_t N, int64_t K, int reps) {
    const Fp8Weight w8(N, K, 1);
    Tensor w16 = dev(DType::BF16, {N, K}, 2, 0.02f);
    Tensor scratch = Tensor::empty(ops::device_allocator(ctx.device), DType::BF16, {N, K});
    for (int64_t T : {1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}) {
        Tensor x = dev(DType::BF16, {T, K}, 3), y = dev(DType::BF16, {T, N}, 4);
        const std::string shape = what + " T=" + std::to_string(T);
        const double flops = 2.0 * T * N * K;
        if (ops::cuda::linear_gemv_fp8_fits(x, w8.view))
            report("linear fp8 gemv " + shape,
                   time_ms([&] { ops::cuda::linear_gemv_fp8(ctx, x, w8.view, y, false); }, reps),
                   flops);
        report("linear fp8 tensor_cores " + shape,
               time_ms([&] { ops::cuda::linear_tc_fp8(ctx, x, w8.view, y, false); }, reps), flops);
        if (ops::cuda::linear_w8a8_fits(x, w8.view, y))
            report("linear fp8 w8a8 " + shape, time_ms([&] {
                       ops::cuda::linear_w8a8(ctx, x, w8.view, y, false);
                   }, reps),
                   flops);
        report("linear fp8 dequantize+cublas " + shape, time_ms([&] {
                   ops::cuda::dequantize_fp8(ctx, w8.view, scratch);
                   ops::cuda::linear_cublas(ctx, x, scratch, y, false);
               }, reps),
               flops);
        report("linear bf16 " + shape, time_ms([&] { ops::linear(ctx, x, w16, y, false); }, reps),
               flops);
    }
}

// moe_block as ops/moe.cpp composes it past the fused route, with the routed experts on the
// grouped fp8 tensor-core route.
void moe_block_grouped_fp8(const TensorView& h, const TensorView& logits, int64_t k,
                           const Fp8Weight& egu, const Fp8Weight& edn, const Fp8Weight& sgu,
                           const Fp8Weight& sdn, const TensorView& y) {
    Allocator& a = ops::device_allocator(ctx.device);
    const int64_t T = h.size(0), H = h.size(1), E = egu.q.size(0), Is = sdn.q.size(1);
    Tensor w = Tensor::empty(a, DType::F32, {T, k}), ids = Tensor::empty(a, DType::I32, {T, k});
    ops::moe_route(ctx, logits.narrow(1, 0, E), k, w, ids);
    ops::cuda::moe_experts_fp8(ctx, h, egu.view, edn.view, ids, w, y);
    Tensor gu = Tensor::empty(a, DType::BF16, {T, 2 * Is}), act = Tensor::empty(a, DType::BF16, {T, Is});
    Tensor shared = Tensor::empty(a, DType::BF16, {T, H});
    ops::linear(ctx, h, sgu.view, gu);
    ops::silu_mul(ctx, gu, act);
    ops::linear(ctx, act, sdn.view, shared);
    ops::add_sigmoid_scaled(ctx, logits.narrow(1, E, 1), shared, y);
}

void moe_routes(int reps) {
    const int64_t E = 256, k = 8, H = 2048, I = 512, Is = 512;
    const Fp8Weight egu(2 * I, H, 10, E), edn(H, I, 12, E), sgu(2 * Is, H, 14), sdn(H, Is, 16);
    Tensor gu16 = dev(DType::BF16, {E, 2 * I, H}, 20, 0.02f), dn16 = dev(DType::BF16, {E, H, I}, 21, 0.02f);
    Tensor sgu16 = dev(DType::BF16, {2 * Is, H}, 22, 0.02f), sdn16 = dev(DType::BF16, {H, Is}, 23, 0.02f);
    for (int64_t T : {8, 16, 32, 64, 128, 256, 512, 4096, 8192}) {
        Tensor h = dev(DType::BF16, {T, H}, 30), y = dev(DType::BF16, {T, H}, 31);
        Tensor logits = dev(DType::F32, {T, E + 1}, 32, 2.0f);
        const double flops = 2.0 * T * 3 * H * (k * I + Is);
        const std::string shape = " T=" + std::to_string(T);
        if (ops::cuda::moe_block_decode_fits(h, logits, k, egu.view, edn.view, sgu.view, sdn.view))
            report("moe_block fp8 fused_decode" + shape, time_ms([&] {
                       ops::cuda::moe_block_decode(ctx, h, logits, k, egu.view, edn.view, sgu.view,
                                                   sdn.view, y, 0);
                   }, reps),
                   flops);
        // The grouped route's kernels of moe_experts.fp8, each forced (an A/B in one run; the
        // W8A8 ones are left out where they do not run: off sm_90, or not built).
        const ops::RouteTable before = ops::active_route_table();
        for (int kernel :
             {ops::kRouteMmaSyncFp8, ops::kRouteWgmmaW8a8, ops::kRouteWgmmaW8a8Swap}) {
            ops::set_active_route_table(before.with_bands(ops::RouteId::MoeExpertsFp8,
                                                          {{ops::kRouteUnbounded, kernel}}));
            if (kernel != ops::kRouteMmaSyncFp8 &&
                !ops::cuda::w8a8_route(ctx, egu.view, edn.view, T * k))
                continue;
            report(std::string("moe_block fp8 grouped ") +
                       ops::route_info(ops::RouteId::MoeExpertsFp8).kernels[size_t(kernel)].name +
                       shape,
                   time_ms([&] { moe_block_grouped_fp8(h, logits, k, egu, edn, sgu, sdn, y); },
                           reps),
                   flops);
        }
        ops::set_active_route_table(before);
        report("moe_block bf16" + shape, time_ms([&] {
                   ops::moe_block(ctx, h, logits, k, gu16, dn16, sgu16, sdn16, y);
               }, reps),
               flops);
    }
}

} // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::stoi(argv[1]) : 20;
    const std::string only = argc > 2 ? argv[2] : ""; // "linear" or "moe": that part alone
    ctx = ops::ExecContext::cuda(0, DType::BF16);
    ops::bind_device(ctx);
    if (only != "moe") {
        linear_routes("N=16384 K=5120", 16384, 5120, reps); // 27B GDN qkv|z
        linear_routes("N=34816 K=5120", 34816, 5120, reps); // 27B MLP gate|up
        linear_routes("N=5120 K=17408", 5120, 17408, reps); // 27B MLP down
        linear_routes("N=12288 K=2048", 12288, 2048, reps); // 35B-A3B GDN qkv|z
        linear_routes("N=2048 K=4096", 2048, 4096, reps);   // 35B-A3B attention o
    }
    if (only != "linear") moe_routes(reps);
    return 0;
}
