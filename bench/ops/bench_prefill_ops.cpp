// Times the prefill op families at the real Qwen3.6 shapes on CUDA (bf16 activations), one JSON
// line per case: milliseconds per call (median of reps) and the rate against the op's useful
// FLOPs. Used to see where a long prefill spends its time; whole-model figures come from
// `ninfer bench`.
//   bench_prefill_ops [T] [reps]
//   bench_prefill_ops vision [images] [reps]   (only the vision tower's ops; also run last by
//                                               the default run, for one image)
//   bench_prefill_ops moe [T] [reps]            (only moe_experts at T, T/4, T/16, T/64 rows,
//                                               each route of moe_experts.bf16 forced)
//   bench_prefill_ops attention [T] [reps]      (only paged_attention at T, T/4, T/16 rows,
//                                               each kernel of attention_prefill.bf16 forced;
//                                               the 35B's heads also over int8 and fp8 planes,
//                                               attention_prefill.coded's kernels)
//   bench_prefill_ops gdn_batch [reps]          (gated_delta_rule over 64, 16, 8 prompts of
//                                               1,024 rows and one of 8,192; the small ops)
//   bench_prefill_ops router [reps]             (the router's F32-output linear at 8,192 and
//                                               65,536 rows, N = 257 and padded widths)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/bias_act.h"
#include "ops/conv1d.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/vision_ops.h"
#include "ops/elementwise.h"
#include "ops/gated_delta_rule.h"
#include "ops/gated_rms_norm.h"
#include "ops/kv_cache.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/moe.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/rope_table.h"
#include "ops/route_table.h"
#include "ops/segment_attention.h"

namespace {

using namespace ninfer;

ops::ExecContext ctx;

Tensor device_random(DType dt, std::vector<int64_t> shape, uint64_t seed, float stddev = 1.0f) {
    return bench::random_tensor(ctx, dt, shape, seed, stddev);
}

Tensor device_ints(const std::vector<int32_t>& v) {
    return bench::int_tensor(ctx, v);
}

double time_ms(const std::function<void()>& body, int reps) {
    return bench::time_ms(ctx, body, reps);
}

void report(const std::string& name, double ms, double flops) {
    std::printf("{\"op\": \"%s\", \"ms\": %.3f, \"tflops\": %.1f}\n", name.c_str(), ms,
                flops / ms / 1e9);
    std::fflush(stdout);
}

// S prompts of L rows each from position 0 (one: a long prompt; many: a serving step's
// prefill), each with its own state slot and contiguous KV blocks.
struct Batch {
    std::vector<int32_t> row_begin, pos_begin, slot, table;
    Tensor d_row, d_pos, d_slot, d_table;
    ops::SeqBatch b;
    Batch(int32_t T, int32_t bs) : Batch(1, T, bs) {}
    Batch(int32_t S, int32_t L, int32_t bs) {
        const int32_t blocks = (L + bs - 1) / bs;
        for (int32_t s = 0; s <= S; ++s) row_begin.push_back(s * L);
        for (int32_t s = 0; s < S; ++s) pos_begin.push_back(0), slot.push_back(s);
        for (int32_t i = 0; i < S * blocks; ++i) table.push_back(i);
        d_row = device_ints(row_begin), d_pos = device_ints(pos_begin);
        d_slot = device_ints(slot), d_table = device_ints(table);
        b.num_seqs = S, b.num_rows = S * L, b.max_rows_per_seq = L, b.max_context = L;
        b.host_row_begin = row_begin.data(), b.host_pos_begin = pos_begin.data();
        b.host_state_slot = slot.data(), b.host_block_table = table.data();
        b.block_table_stride = blocks, b.block_size = bs;
        b.row_begin = d_row, b.pos_begin = d_pos, b.state_slot = d_slot, b.block_table = d_table;
    }
};

// A T-row prompt over its own KV (bf16, or int8 / fp8 planes that kv_cache_write fills from
// random bf16 rows), on the prefill kernel the table in force gives it.
void attention(int32_t T, int64_t nH, int64_t nKV, int reps,
               ops::KvDtype kv = ops::KvDtype::Activation, const std::string& tag = "") {
    const int64_t D = 256;
    const int32_t bs = 16;
    Batch batch(T, bs);
    const int64_t NB = (T + bs - 1) / bs;
    Tensor q = device_random(DType::BF16, {T, nH, D}, 1),
           out = device_random(DType::BF16, {T, nH, D}, 4);
    std::vector<Tensor> keep;
    auto plane = [&](uint64_t seed) {
        if (kv == ops::KvDtype::Activation) {
            keep.push_back(device_random(DType::BF16, {NB, bs, nKV, D}, seed));
            return ops::KvPlane(keep.back());
        }
        return bench::quantized_kv_plane(ctx, kv, NB, bs, nKV, D, keep);
    };
    const ops::KvPlane kc = plane(2), vc = plane(3);
    if (kc.quantized()) {
        Tensor k = device_random(DType::BF16, {T, nKV, D}, 5),
               v = device_random(DType::BF16, {T, nKV, D}, 6);
        ops::kv_cache_write(ctx, k, v, batch.b, kc, vc);
    }
    const double ms =
        time_ms([&] { ops::paged_attention(ctx, q, kc, vc, batch.b, 0.0625f, out); }, reps);
    std::string name = "paged_attention T=" + std::to_string(T) + " nH=" + std::to_string(nH) +
                       " nKV=" + std::to_string(nKV);
    if (kc.quantized()) name += std::string(" kv=") + ops::kv_dtype_name(kv, DType::BF16);
    report(name + tag, ms, 4.0 * double(T) * double(T) / 2 * D * nH);
}

// Each kernel of attention_prefill.bf16 (bf16 planes) or .coded (quantized planes; cuDNN's
// through bf16 staging) forced, an A/B in one run. cuDNN's line is left out, with its reason on
// stderr, where libcudnn does not load; a shape it has no plan for falls back to flash (its message
// on stderr says so).
void attention_kernels(int32_t T, int64_t nH, int64_t nKV, int reps,
                       ops::KvDtype kv = ops::KvDtype::Activation) {
    const ops::RouteTable before = ops::active_route_table();
    const ops::RouteId id = kv == ops::KvDtype::Activation ? ops::RouteId::AttentionPrefillBf16
                                                           : ops::RouteId::AttentionPrefillCoded;
    for (int kernel : {ops::kRouteFlash, ops::kRouteCudnn}) {
        if (!ops::route_kernel_available(id, kernel)) {
            std::fprintf(stderr, "paged_attention cudnn: %s\n",
                         ops::cuda::cudnn_status().c_str());
            continue;
        }
        ops::set_active_route_table(before.with_bands(id, {{ops::kRouteUnbounded, kernel}}));
        const auto& info = ops::route_info(id);
        attention(T, nH, nKV, reps, kv, " " + info.kernels[size_t(kernel)].name);
    }
    ops::set_active_route_table(before);
}

// gated_delta_rule over S prompts of L rows each (one: a long prompt; many: a serving step's
// prefill, where the scan takes its 8-warp blocks; NINFER_GDN_SCAN_WIDE=0 keeps 4, for an A/B).
void gdn(int32_t S, int32_t L, int64_t Hk, int64_t Hv, int reps) {
    const int64_t dk = 128, dv = 128, T = int64_t(S) * L;
    Batch batch(S, L, 16);
    Tensor q = device_random(DType::BF16, {T, Hk, dk}, 5),
           k = device_random(DType::BF16, {T, Hk, dk}, 6);
    Tensor v = device_random(DType::BF16, {T, Hv, dv}, 7),
           out = device_random(DType::BF16, {T, Hv, dv}, 8);
    Tensor g = device_random(DType::F32, {T, Hv}, 9, 0.01f),
           beta = device_random(DType::F32, {T, Hv}, 10, 0.1f);
    Tensor state = device_random(DType::F32, {S, Hv, dk, dv}, 11, 0.01f);
    const double ms =
        time_ms([&] { ops::gated_delta_rule(ctx, q, k, v, g, beta, batch.b, state, out); }, reps);
    const std::string rows =
        S == 1 ? "T=" + std::to_string(L) : std::to_string(S) + " x " + std::to_string(L) + " rows";
    report("gated_delta_rule " + rows + " Hv=" + std::to_string(Hv), ms,
           6.0 * double(T) * Hv * dk * dv);
}

void moe(int32_t T, int reps) {
    const int64_t E = 256, k = 8, H = 2048, I = 512;
    Tensor x = device_random(DType::BF16, {T, H}, 12), y = device_random(DType::BF16, {T, H}, 13);
    Tensor gate_up = device_random(DType::BF16, {E, 2 * I, H}, 14, 0.02f);
    Tensor down = device_random(DType::BF16, {E, H, I}, 15, 0.02f);
    Tensor logits = device_random(DType::F32, {T, E}, 16);
    Tensor w = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {T, k});
    Tensor ids = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {T, k});
    ops::moe_route(ctx, logits, k, w, ids);
    // The route table's choice, then each kernel of moe_experts.bf16 forced (an A/B in one run;
    // a kernel this GPU does not take falls back to mma_sync).
    const ops::RouteTable before = ops::active_route_table();
    const std::string label = "moe_experts T=" + std::to_string(T);
    auto run = [&](const std::string& name) {
        const double ms =
            time_ms([&] { ops::moe_experts(ctx, x, gate_up, down, ids, w, y); }, reps);
        report(name, ms, 2.0 * T * k * 3 * H * I);
    };
    run(label);
    for (int kernel : {ops::kRouteMmaSync, ops::kRouteWgmma}) {
        ops::set_active_route_table(before.with_bands(ops::RouteId::MoeExpertsBf16,
                                                      {{ops::kRouteUnbounded, kernel}}));
        run(label + " " + ops::route_info(ops::RouteId::MoeExpertsBf16).kernels[size_t(kernel)].name);
    }
    ops::set_active_route_table(before);
}

// A bf16 linear [T, K] x [N, K]^T into [T, N] of out_dtype (F32: the router's logits).
void dense(int32_t T, int64_t N, int64_t K, int reps, DType out_dtype = DType::BF16) {
    Tensor x = device_random(DType::BF16, {T, K}, 17),
           w = device_random(DType::BF16, {N, K}, 18, 0.02f);
    Tensor y = device_random(out_dtype, {T, N}, 19);
    const double ms = time_ms([&] { ops::linear(ctx, x, w, y, false); }, reps);
    report("linear T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               (out_dtype == DType::F32 ? " f32 out" : ""),
           ms, 2.0 * T * N * K);
}

// The small ops of a 35B-A3B layer at T rows (bf16): where a prefill's time goes besides the
// GEMMs, attention, GDN and experts. Rate: GB/s of the bytes each must move.
void small_ops(int32_t T, int reps) {
    const int64_t H = 2048, C = 8192, Hv = 32, dv = 128, nH = 16, nKV = 2, D = 256, E = 256;
    auto bf16 = [&](std::vector<int64_t> shape, uint64_t seed) {
        return device_random(DType::BF16, std::move(shape), seed);
    };
    auto gbs = [&](const std::string& name, double ms, double bytes) {
        std::printf("{\"op\": \"%s T=%d\", \"ms\": %.3f, \"gb_s\": %.0f}\n", name.c_str(), T, ms,
                    bytes / ms / 1e6);
        std::fflush(stdout);
    };
    Batch batch(T, 16);
    Tensor x = bf16({T, H}, 30), nw = bf16({H}, 31), h = bf16({T, H}, 32);
    gbs("rms_norm H=2048", time_ms([&] { ops::rms_norm(ctx, x, nw, 1e-6f, h); }, reps),
        4.0 * T * H);
    Tensor cx = bf16({T, C}, 33), cw = bf16({C, 4}, 34), cs = bf16({1, C, 3}, 35),
           cy = bf16({T, C}, 36);
    gbs("causal_conv1d_silu C=8192",
        time_ms([&] { ops::causal_conv1d_silu(ctx, cx, cw, batch.b, cs, cy); }, reps), 4.0 * T * C);
    // The same op over rows that are not 16-byte multiples (one extra column): the kernel's one
    // channel a thread route, for an A/B in one run.
    Tensor cx1 = bf16({T, C + 1}, 43);
    gbs("causal_conv1d_silu C=8192 one channel a thread",
        time_ms([&] { ops::causal_conv1d_silu(ctx, cx1.view().narrow(1, 0, C), cw, batch.b, cs, cy); },
                reps),
        4.0 * T * C);
    Tensor ga = bf16({T, Hv}, 37), gb = bf16({T, Hv}, 38), alog = bf16({Hv}, 39),
           dtb = bf16({Hv}, 40);
    Tensor g = device_random(DType::F32, {T, Hv}, 41),
           beta = device_random(DType::F32, {T, Hv}, 42);
    gbs("gdn_gates Hv=32", time_ms([&] { ops::gdn_gates(ctx, ga, gb, alog, dtb, g, beta); }, reps),
        12.0 * T * Hv);
    Tensor core = bf16({T, Hv, dv}, 43), z = bf16({T, Hv, dv}, 44), gw = bf16({dv}, 45);
    gbs("gated_rms_norm Hv=32",
        time_ms([&] { ops::gated_rms_norm(ctx, core, z, gw, 1e-6f, core); }, reps),
        6.0 * T * Hv * dv);
    Tensor q = bf16({T, nH, D}, 46), pos = device_ints(std::vector<int32_t>(size_t(T), 7));
    gbs("rope q 16x256 rotary 64", time_ms([&] { ops::rope(ctx, q, pos, 64, 1e7); }, reps),
        4.0 * T * nH * D);
    const int64_t NB = (T + 15) / 16;
    Tensor k = bf16({T, nKV, D}, 47), v = bf16({T, nKV, D}, 48);
    Tensor kc = bf16({NB, 16, nKV, D}, 49), vc = bf16({NB, 16, nKV, D}, 50);
    gbs("kv_cache_write 2x256",
        time_ms([&] { ops::kv_cache_write(ctx, k, v, batch.b, kc, vc); }, reps), 8.0 * T * nKV * D);
    Tensor attn = bf16({T, nH * D}, 51), gate = bf16({T, nH * D}, 52);
    gbs("sigmoid_mul 4096", time_ms([&] { ops::sigmoid_mul(ctx, attn, gate, attn); }, reps),
        6.0 * T * nH * D);
    Tensor gu = bf16({T, 1024}, 53), act = bf16({T, 512}, 54);
    gbs("silu_mul 512", time_ms([&] { ops::silu_mul(ctx, gu, act); }, reps), 6.0 * T * 512);
    Tensor rl = device_random(DType::F32, {T, E + 1}, 55);
    Tensor rw = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {T, 8});
    Tensor ri = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {T, 8});
    gbs("moe_route E=256",
        time_ms([&] { ops::moe_route(ctx, rl.view().narrow(1, 0, E), 8, rw, ri); }, reps),
        4.0 * T * E);
    Tensor shared = bf16({T, H}, 56);
    gbs("add_sigmoid_scaled H=2048",
        time_ms([&] { ops::add_sigmoid_scaled(ctx, rl.view().narrow(1, E, 1), shared, x); }, reps),
        6.0 * T * H);
}

// The vision tower (27 blocks of hidden 1152, 16 heads of 72, MLP 4304) on `images` images of
// 1024x1024 (4096 patches each, one segment each), bf16: segment_attention on both CUDA routes
// and the small ops at T = 4096 * images rows, then one whole block (LayerNorm, qkv with bias,
// 2-D rotary, attention, proj, LayerNorm, fc1 + gelu_tanh, fc2, residuals) against the rate of
// an 8192^3 GEMM measured in the same run (the goal: the block at >= 40% of it).
void vision(int images, int reps) {
    const int64_t P = 4096, T = P * images, H = 1152, nH = 16, D = 72, I = 4304;
    const std::string tag = " T=" + std::to_string(T) + " images=" + std::to_string(images);
    auto bf16 = [&](std::vector<int64_t> shape, uint64_t seed, float stddev = 1.0f) {
        return device_random(DType::BF16, std::move(shape), seed, stddev);
    };
    auto gbs = [&](const std::string& name, double ms, double bytes) {
        std::printf("{\"op\": \"%s%s\", \"ms\": %.3f, \"gb_s\": %.0f}\n", name.c_str(), tag.c_str(),
                    ms, bytes / ms / 1e6);
        std::fflush(stdout);
    };
    std::vector<int32_t> seg{0};
    for (int i = 0; i < images; ++i) seg.push_back(seg.back() + int32_t(P));
    Tensor d_seg = device_ints(seg);
    const double attn_flops = 4.0 * double(P) * double(P) * D * nH * images;

    Tensor qkv = bf16({T, 3 * nH * D}, 60), attn = bf16({T, nH, D}, 61);
    auto part = [&](int i) { return qkv.view().split_heads(i * nH * D, nH, D); };
    const float scale = 1.0f / std::sqrt(float(D));
    report("segment_attention tensor-core D=72 nH=16" + tag,
           time_ms(
               [&] {
                   ops::segment_attention(ctx, part(0), part(1), part(2), seg.data(), d_seg, scale,
                                          attn);
               },
               reps),
           attn_flops);
    report("segment_attention cuda-core D=72 nH=16" + tag,
           time_ms(
               [&] {
                   ops::cuda::segment_attention_general(ctx, part(0), part(1), part(2), seg.data(),
                                                        d_seg, scale, attn);
               },
               std::min(reps, 3)),
           attn_flops);

    Tensor h = bf16({T, H}, 62), x = bf16({T, H}, 63), lw = bf16({H}, 64), lb = bf16({H}, 65);
    gbs("layer_norm K=1152", time_ms([&] { ops::layer_norm(ctx, h, lw, lb, 1e-6f, x); }, reps),
        4.0 * T * H);
    Tensor f1 = bf16({T, I}, 66), b1 = bf16({I}, 67);
    gbs("bias_act gelu_tanh N=4304",
        time_ms([&] { ops::bias_act(ctx, f1, b1, ops::Activation::GeluTanh); }, reps), 4.0 * T * I);
    Tensor cs = device_random(DType::F32, {T, D / 2}, 68),
           sn = device_random(DType::F32, {T, D / 2}, 69);
    gbs("rope_table q 16x72", time_ms([&] { ops::rope_table(ctx, part(0), cs, sn, D); }, reps),
        4.0 * T * nH * D + 8.0 * T * D / 2);

    // One block, as the model runs it.
    Tensor w_qkv = bf16({3 * H, H}, 70, 0.02f), b_qkv = bf16({3 * H}, 71);
    Tensor w_o = bf16({H, H}, 72, 0.02f), b_o = bf16({H}, 73), o = bf16({T, H}, 74);
    Tensor w_1 = bf16({I, H}, 75, 0.02f), w_2 = bf16({H, I}, 76, 0.02f), b_2 = bf16({H}, 77);
    const TensorView attn2 = attn.view().reshape({T, H});
    auto block = [&] {
        ops::layer_norm(ctx, h, lw, lb, 1e-6f, x);
        ops::linear(ctx, x, w_qkv, qkv, false);
        ops::bias_act(ctx, qkv, b_qkv, ops::Activation::None);
        ops::rope_table(ctx, part(0), cs, sn, D);
        ops::rope_table(ctx, part(1), cs, sn, D);
        ops::segment_attention(ctx, part(0), part(1), part(2), seg.data(), d_seg, scale, attn);
        ops::linear(ctx, attn2, w_o, o, false);
        ops::bias_act(ctx, o, b_o, ops::Activation::None);
        ops::add(ctx, h, o, h);
        ops::layer_norm(ctx, h, lw, lb, 1e-6f, x);
        ops::linear(ctx, x, w_1, f1, false);
        ops::bias_act(ctx, f1, b1, ops::Activation::GeluTanh);
        ops::linear(ctx, f1, w_2, o, false);
        ops::bias_act(ctx, o, b_2, ops::Activation::None);
        ops::add(ctx, h, o, h);
    };
    const double gemm_flops = 2.0 * T * H * (3 * H + H + 2 * I);
    const double block_ms = time_ms(block, reps);
    report("vision block (gemms + attention + small ops)" + tag, block_ms, gemm_flops + attn_flops);
    report("vision block gemms only" + tag,
           time_ms(
               [&] {
                   ops::linear(ctx, x, w_qkv, qkv, false);
                   ops::linear(ctx, attn2, w_o, o, false);
                   ops::linear(ctx, x, w_1, f1, false);
                   ops::linear(ctx, f1, w_2, o, false);
               },
               reps),
           gemm_flops);
    Tensor gx = bf16({8192, 8192}, 78), gw = bf16({8192, 8192}, 79, 0.02f),
           gy = bf16({8192, 8192}, 80);
    const double gemm_ms = time_ms([&] { ops::linear(ctx, gx, gw, gy, false); }, reps);
    report("linear 8192^3 (the GEMM rate)", gemm_ms, 2.0 * 8192.0 * 8192.0 * 8192.0);
    const double block_rate = (gemm_flops + attn_flops) / block_ms / 1e9;
    const double gemm_rate = 2.0 * 8192.0 * 8192.0 * 8192.0 / gemm_ms / 1e9;
    std::printf("{\"op\": \"vision block / GEMM rate%s\", \"fraction\": %.3f}\n", tag.c_str(),
                block_rate / gemm_rate);
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "vision") {
        ctx = ops::ExecContext::cuda(0, DType::BF16);
        ops::bind_device(ctx);
        const int images = argc > 2 ? std::stoi(argv[2]) : 1;
        const int reps = argc > 3 ? std::stoi(argv[3]) : 5;
        vision(images, reps);
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "attention") { // prefill attention's kernels (A/B)
        ctx = ops::ExecContext::cuda(0, DType::BF16);
        ops::bind_device(ctx);
        const int32_t T = argc > 2 ? std::stoi(argv[2]) : 8192;
        const int reps = argc > 3 ? std::stoi(argv[3]) : 5;
        for (int32_t rows : {T, T / 4, T / 16}) {
            for (ops::KvDtype kv :
                 {ops::KvDtype::Activation, ops::KvDtype::Int8, ops::KvDtype::Fp8})
                attention_kernels(rows, 16, 2, reps, kv); // 35B-A3B
            attention_kernels(rows, 24, 4, reps); // 27B
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "moe") { // the MoE lines alone (route A/B)
        ctx = ops::ExecContext::cuda(0, DType::BF16);
        ops::bind_device(ctx);
        const int32_t T = argc > 2 ? std::stoi(argv[2]) : 8192;
        const int reps = argc > 3 ? std::stoi(argv[3]) : 5;
        for (int32_t rows : {T, T / 4, T / 16, T / 64}) moe(rows, reps);
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "gdn_batch") { // serving-step GDN shapes
        ctx = ops::ExecContext::cuda(0, DType::BF16);
        ops::bind_device(ctx);
        const int reps = argc > 2 ? std::stoi(argv[2]) : 5;
        for (auto [S, L] : {std::pair{64, 1024}, {16, 1024}, {8, 1024}, {1, 8192}})
            gdn(S, L, 16, 32, reps);
        small_ops(8192, reps); // the conv and norms beside it
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "router") { // the router GEMM's widths (A/B)
        ctx = ops::ExecContext::cuda(0, DType::BF16);
        ops::bind_device(ctx);
        const int reps = argc > 2 ? std::stoi(argv[2]) : 5;
        for (int32_t rows : {8192, 65536})
            for (int64_t N : {257, 260, 264, 272, 256}) // E + 1, and padded widths
                dense(rows, N, 2048, reps, DType::F32);
        return 0;
    }
    const int32_t T = argc > 1 ? std::stoi(argv[1]) : 8192;
    const int reps = argc > 2 ? std::stoi(argv[2]) : 5;
    ctx = ops::ExecContext::cuda(0, DType::BF16);
    ops::bind_device(ctx);
    for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8, ops::KvDtype::Fp8})
        attention(T, 16, 2, reps, kv); // 35B-A3B
    attention(T, 24, 4, reps); // 27B
    for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8})
        attention_kernels(T, 16, 2, reps, kv);
    gdn(1, T, 16, 32, reps);   // 35B-A3B
    gdn(1, T, 16, 48, reps);   // 27B
    moe(T, reps);              // 35B-A3B
    moe(T / 4, reps);          // 35B-A3B, a 2,048-row chunk (the server's default)
    moe(T / 16, reps);         // 35B-A3B, one prefill chunk (512 rows at the default T)
    moe(T / 64, reps);         // 128 rows: 1,024 pairs
    dense(T, 2048, 2048, reps);
    dense(T, 17408 * 2, 5120, reps); // 27B MLP gate|up
    dense(T, 12352, 2048, reps);     // 35B-A3B GDN in_proj
    dense(T, 264, 2048, reps, DType::F32); // 35B-A3B router + shared gate, padded (router_rows)
    dense(T, 1024, 2048, reps);      // 35B-A3B shared expert gate|up
    small_ops(T, reps);
    vision(1, reps);
    return 0;
}
