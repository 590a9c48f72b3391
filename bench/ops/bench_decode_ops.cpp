// Times the decode-step ops (one token, batch 1; linear also at 2-8 rows) at the real Qwen3.6
// shapes on CUDA, one JSON line per case: microseconds per call and the bytes it must read as
// GB/s. Each case is captured as
// kCallsPerGraph back-to-back calls in one CUDA graph and replayed, as a decode step runs, so the
// figure includes the launch gap between kernels in a graph but not host launch overhead.
// Linear shapes run through both routes (the GEMV kernel and cuBLAS) at 1, 2, 4 and 8 rows to set
// kGemvMaxRows.
// NINFER_PDL=0 turns programmatic dependent launch off, for an A/B of the launch gaps.
//   bench_decode_ops [reps]
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/attention_prep.h"
#include "ops/conv1d.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/elementwise.h"
#include "ops/gated_delta_rule.h"
#include "ops/gated_rms_norm.h"
#include "ops/kv_cache.h"
#include "ops/linear.h"
#include "ops/logits.h"
#include "ops/memory.h"
#include "ops/moe.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/sampling.h"

namespace {

using namespace ninfer;

constexpr int kCallsPerGraph = 20;
ops::ExecContext ctx;
int reps = 20;

Tensor dev(DType dt, std::vector<int64_t> shape, uint64_t seed, float stddev = 1.0f) {
    return bench::random_tensor(ctx, dt, shape, seed, stddev);
}

Tensor ints(const std::vector<int32_t>& v) {
    return bench::int_tensor(ctx, v);
}

// Microseconds per call of body, replayed from a graph of kCallsPerGraph calls.
double graph_us(const std::function<void()>& body) {
    body(); // warm-up (cuBLAS handles, workspaces)
    ops::synchronize(ctx);
    auto graph = ops::capture_graph(ctx, [&] {
        for (int i = 0; i < kCallsPerGraph; ++i) body();
    });
    // bench::time_ms launches the graph once as its warm-up, then times reps replays.
    return bench::time_ms(ctx, [&] { graph->launch(ctx); }, reps) * 1e3 / kCallsPerGraph;
}

void report(const std::string& name, double us, double bytes) {
    std::printf("{\"op\": \"%s\", \"us\": %.2f, \"gb_s\": %.0f}\n", name.c_str(), us,
                bytes / us / 1e3);
    std::fflush(stdout);
}

// The last `rows` rows (a decode row by default) of one sequence of ctx_len positions,
// contiguous KV blocks.
struct DecodeBatch {
    std::vector<int32_t> row_begin, pos_begin, slot{0}, table;
    Tensor d_row, d_pos, d_slot, d_table;
    ops::SeqBatch b;
    DecodeBatch(int32_t ctx_len, int32_t bs, int32_t rows = 1)
        : row_begin{0, rows}, pos_begin{ctx_len - rows} {
        for (int32_t i = 0; i < (ctx_len + bs - 1) / bs; ++i) table.push_back(i);
        d_row = ints(row_begin), d_pos = ints(pos_begin), d_slot = ints(slot),
        d_table = ints(table);
        b.num_seqs = 1, b.num_rows = rows, b.max_rows_per_seq = rows, b.max_context = ctx_len;
        b.host_row_begin = row_begin.data(), b.host_pos_begin = pos_begin.data();
        b.host_state_slot = slot.data(), b.host_block_table = table.data();
        b.block_table_stride = int32_t(table.size()), b.block_size = bs;
        b.row_begin = d_row, b.pos_begin = d_pos, b.state_slot = d_slot, b.block_table = d_table;
    }
};

// A random block-wise fp8 weight [.., N, K] (codes ~ N(0, 64), scales 0.02 / 64), kept alive
// for the process (the benchmarks replay graphs that read it).
ops::WeightView fp8_weight(int64_t N, int64_t K, uint64_t seed, int64_t E = 0) {
    static std::vector<Tensor> keep;
    Allocator& a = ops::device_allocator(ctx.device);
    const int64_t sN = (N + 127) / 128, sK = (K + 127) / 128;
    Tensor q = E ? Tensor::empty(a, DType::F8E4M3, {E, N, K}) : Tensor::empty(a, DType::F8E4M3, {N, K});
    Tensor s = E ? Tensor::empty(a, DType::F32, {E, sN, sK}) : Tensor::empty(a, DType::F32, {sN, sK});
    ops::fill_random(ctx, q, seed, 0.0f, 64.0f);
    ops::fill_random(ctx, s, seed + 1, 0.02f / 64.0f, 0.0f);
    keep.push_back(q);
    keep.push_back(s);
    return ops::WeightView::fp8(q, s, 128, 128);
}

void linear_routes(const std::string& what, int64_t T, int64_t N, int64_t K, DType y_dtype) {
    Tensor x = dev(DType::BF16, {T, K}, 1), w = dev(DType::BF16, {N, K}, 2, 0.02f);
    Tensor y = dev(y_dtype, {T, N}, 3);
    const double bytes = 2.0 * N * K;
    const std::string shape =
        what + " T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
    if (ops::cuda::linear_gemv_fits(x, w))
        report("linear gemv " + shape,
               graph_us([&] { ops::cuda::linear_gemv(ctx, x, w, y, false); }), bytes);
    report("linear cublas " + shape,
           graph_us([&] { ops::cuda::linear_cublas(ctx, x, w, y, false); }), bytes);
    // The same weight as block-wise fp8 (one byte a weight, F32 scales per 128 x 128).
    const ops::WeightView w8 = fp8_weight(N, K, 2);
    report("linear fp8 " + shape, graph_us([&] { ops::linear(ctx, x, w8, y); }),
           double(w8.nbytes()));
}

void small_ops() {
    Tensor x = dev(DType::BF16, {1, 2048}, 4), w = dev(DType::BF16, {2048}, 5),
           y = dev(DType::BF16, {1, 2048}, 6);
    report("rms_norm H=2048", graph_us([&] { ops::rms_norm(ctx, x, w, 1e-6f, y); }), 3 * 4096.0);
    Tensor gu = dev(DType::BF16, {1, 1024}, 7), act = dev(DType::BF16, {1, 512}, 8);
    report("silu_mul 512", graph_us([&] { ops::silu_mul(ctx, gu, act); }), 3072.0);
    DecodeBatch batch(2048, 16);
    const int64_t C = 8192;
    Tensor cx = dev(DType::BF16, {1, C}, 9), cw = dev(DType::BF16, {C, 4}, 10, 0.3f);
    Tensor cs = dev(DType::BF16, {1, C, 3}, 11), cy = dev(DType::BF16, {1, C}, 12);
    report("causal_conv1d_silu C=8192",
           graph_us([&] { ops::causal_conv1d_silu(ctx, cx, cw, batch.b, cs, cy); }), C * 16.0);
}

void gdn_core(int64_t Hv) {
    DecodeBatch batch(2048, 16);
    const int64_t Hk = 16, d = 128;
    Tensor q = dev(DType::BF16, {1, Hk, d}, 13), k = dev(DType::BF16, {1, Hk, d}, 14);
    Tensor v = dev(DType::BF16, {1, Hv, d}, 15), out = dev(DType::BF16, {1, Hv, d}, 16);
    Tensor g = dev(DType::F32, {1, Hv}, 17, 0.01f), beta = dev(DType::F32, {1, Hv}, 18, 0.1f);
    Tensor state = dev(DType::F32, {1, Hv, d, d}, 19, 0.01f);
    report("gated_delta_rule T=1 Hv=" + std::to_string(Hv),
           graph_us([&] { ops::gated_delta_rule(ctx, q, k, v, g, beta, batch.b, state, out); }),
           2.0 * 4 * Hv * d * d); // state read + written
    // The GDN core of a decode step (conv, gates, recurrence, gated norm): the fused kernel of
    // gdn_core against the four ops it replaces, in one run. in_proj's output: qkv | z | b | a.
    const int64_t C = 2 * Hk * d + Hv * d, Vd = Hv * d;
    Tensor proj = dev(DType::BF16, {1, C + Vd + 2 * Hv}, 32);
    Tensor conv_w = dev(DType::BF16, {C, 4}, 33, 0.3f);
    Tensor conv_state = dev(DType::BF16, {1, C, 3}, 34), conv_out = dev(DType::BF16, {1, C}, 35);
    Tensor A_log = dev(DType::BF16, {Hv}, 36, 0.5f), dt_bias = dev(DType::BF16, {Hv}, 37, 0.5f);
    Tensor norm_w = dev(DType::BF16, {d}, 38);
    const TensorView p = proj.view(), qkv = p.narrow(1, 0, C), z = p.narrow(1, C, Vd);
    const TensorView b = p.narrow(1, C + Vd, Hv), a = p.narrow(1, C + Vd + Hv, Hv);
    auto heads = [&](const TensorView& x, int64_t col0, int64_t n) { // [1, n, d] column view
        TensorView h = x.narrow(1, col0, n * d);
        h.ndim = 3;
        h.shape = {1, n, d, 1};
        h.stride = {x.stride[0], d, 1, 0};
        return h;
    };
    const double gdn_bytes = 2.0 * 4 * Hv * d * d + 2.0 * (11 * C + 2 * Vd); // + qkv, conv, z, core
    report("gdn_core T=1 Hv=" + std::to_string(Hv), graph_us([&] {
               ops::gdn_core(ctx, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, 1e-6f, batch.b,
                             conv_state, state, conv_out, g, beta, out);
           }),
           gdn_bytes);
    report("gdn 4 ops T=1 Hv=" + std::to_string(Hv), graph_us([&] {
               ops::causal_conv1d_silu(ctx, qkv, conv_w, batch.b, conv_state, conv_out);
               ops::gdn_gates(ctx, a, b, A_log, dt_bias, g, beta);
               ops::gated_delta_rule(ctx, heads(conv_out, 0, Hk), heads(conv_out, Hk * d, Hk),
                                     heads(conv_out, 2 * Hk * d, Hv), g, beta, batch.b, state, out);
               ops::gated_rms_norm(ctx, out, heads(z, 0, Hv), norm_w, 1e-6f, out);
           }),
           gdn_bytes);
}

// One decode row over a KV cache of ctx_len positions stored as kv (bf16, or the int8 / fp8
// codes and scales that kv_cache_write makes of random bf16 rows). Rate: the planes' bytes.
void attention_decode(int64_t nH, int64_t nKV, int32_t ctx_len,
                      ops::KvDtype kv = ops::KvDtype::Activation) {
    const int64_t D = 256;
    const int32_t bs = 16;
    DecodeBatch batch(ctx_len, bs);
    const int64_t NB = (ctx_len + bs - 1) / bs;
    Tensor q = dev(DType::BF16, {1, nH, D}, 20), out = dev(DType::BF16, {1, nH, D}, 21);
    std::vector<Tensor> keep;
    auto plane = [&](uint64_t seed) {
        if (kv == ops::KvDtype::Activation) {
            keep.push_back(dev(DType::BF16, {NB, bs, nKV, D}, seed));
            return ops::KvPlane(keep.back());
        }
        return bench::quantized_kv_plane(ctx, kv, NB, bs, nKV, D, keep);
    };
    const ops::KvPlane kc = plane(22), vc = plane(23);
    if (kc.quantized()) {
        DecodeBatch all(ctx_len, bs, ctx_len);
        Tensor k = dev(DType::BF16, {ctx_len, nKV, D}, 24);
        Tensor v = dev(DType::BF16, {ctx_len, nKV, D}, 25);
        ops::kv_cache_write(ctx, k, v, all.b, kc, vc);
        ops::synchronize(ctx);
    }
    std::string name = "paged_attention T=1 ctx=" + std::to_string(ctx_len) +
                       " nH=" + std::to_string(nH) + " nKV=" + std::to_string(nKV);
    if (kc.quantized()) name += std::string(" kv=") + ops::kv_dtype_name(kv, DType::BF16);
    report(name, graph_us([&] { ops::paged_attention(ctx, q, kc, vc, batch.b, 0.0625f, out); }),
           2.0 * ctx_len * nKV * ops::kv_row_bytes(kv, DType::BF16, D));
}

// An attention layer's work between in_proj and paged attention at decode (q/k norms, RoPE, the
// cache write): the fused kernel of attention_prep against the five ops it replaces, in one run.
// in_proj's output as the model views it: rows of the scratch's width (35B: gdn_in's 12352),
// per query head [q | gate], then k, then v.
void attention_prep_decode(int64_t nH, int64_t nKV, int64_t proj_width) {
    const int64_t D = 256, rot = 64, W = (2 * nH + 2 * nKV) * D;
    const int32_t bs = 16, ctx_len = 2048;
    DecodeBatch batch(ctx_len, bs);
    const int64_t NB = (ctx_len + bs - 1) / bs;
    Tensor proj = dev(DType::BF16, {1, proj_width}, 40);
    Tensor q_norm = dev(DType::BF16, {D}, 41, 0.2f), k_norm = dev(DType::BF16, {D}, 42, 0.2f);
    Tensor q = dev(DType::BF16, {1, nH, D}, 43), k = dev(DType::BF16, {1, nKV, D}, 44);
    Tensor kc = dev(DType::BF16, {NB, bs, nKV, D}, 45), vc = dev(DType::BF16, {NB, bs, nKV, D}, 46);
    Tensor positions = ints({ctx_len - 1});
    const TensorView p = proj.view().narrow(1, 0, W);
    const TensorView q_in = p.split_heads(0, nH, D, 2 * D),
                     k_in = p.split_heads(2 * nH * D, nKV, D);
    const TensorView v_in = p.split_heads((2 * nH + nKV) * D, nKV, D);
    const double bytes = 2.0 * 2 * (nH + 2 * nKV) * D; // q, k, v heads read once, written once
    const std::string shape = " T=1 nH=" + std::to_string(nH) + " nKV=" + std::to_string(nKV);
    report("attention_prep" + shape, graph_us([&] {
               ops::attention_prep(ctx, q_in, k_in, v_in, q_norm, k_norm, 1e-6f, positions, rot,
                                   1e7, batch.b, q, k, kc, vc);
           }),
           bytes);
    report("attention_prep 5 ops" + shape, graph_us([&] {
               ops::rms_norm(ctx, q_in, q_norm, 1e-6f, q);
               ops::rms_norm(ctx, k_in, k_norm, 1e-6f, k);
               ops::rope(ctx, q, positions, rot, 1e7);
               ops::rope(ctx, k, positions, rot, 1e7);
               ops::kv_cache_write(ctx, k, v_in, batch.b, kc, vc);
           }),
           bytes);
}

void moe_decode() {
    const int64_t E = 256, k = 8, H = 2048, I = 512;
    Tensor x = dev(DType::BF16, {1, H}, 24), y = dev(DType::BF16, {1, H}, 25);
    Tensor gate_up = dev(DType::BF16, {E, 2 * I, H}, 26, 0.02f);
    Tensor down = dev(DType::BF16, {E, H, I}, 27, 0.02f);
    Tensor logits = dev(DType::F32, {1, E}, 28);
    Tensor w = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {1, k});
    Tensor ids = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {1, k});
    report("moe_route T=1 E=256", graph_us([&] { ops::moe_route(ctx, logits, k, w, ids); }),
           E * 4.0);
    report("moe_experts T=1 (8 experts)",
           graph_us([&] { ops::moe_experts(ctx, x, gate_up, down, ids, w, y); }),
           2.0 * k * 3 * H * I);
    // The whole block after the router linear (route, 8 experts, shared expert, gate): the two
    // fused decode kernels, against ~8 kernels (route, experts, 3 shared, gate) before.
    const int64_t Is = 512;
    Tensor logits_shared = dev(DType::F32, {1, E + 1}, 29); // column E: the shared gate
    Tensor shared_gate_up = dev(DType::BF16, {2 * Is, H}, 30, 0.02f);
    Tensor shared_down = dev(DType::BF16, {H, Is}, 31, 0.02f);
    report("moe_block T=1 (8 experts + shared)", graph_us([&] {
               ops::moe_block(ctx, x, logits_shared, k, gate_up, down, shared_gate_up, shared_down,
                              y);
           }),
           2.0 * 3 * H * (k * I + Is));
    const ops::WeightView gu8 = fp8_weight(2 * I, H, 40, E), dn8 = fp8_weight(H, I, 42, E);
    const ops::WeightView sgu8 = fp8_weight(2 * Is, H, 44), sdn8 = fp8_weight(H, Is, 46);
    report("moe_block fp8 T=1 (8 experts + shared)", graph_us([&] {
               ops::moe_block(ctx, x, logits_shared, k, gu8, dn8, sgu8, sdn8, y);
           }),
           1.0 * 3 * H * (k * I + Is));
}

// The device work of Sampler::sample for one greedy row, without its two host copies: the row's
// log-sum-exp, then the greedy token with its raw logit, over the real (padded) vocabulary.
void sampler_greedy() {
    const int64_t V = 248320, limit = 248077;
    Allocator& alloc = ops::device_allocator(ctx.device);
    Tensor logits = dev(DType::F32, {1, V}, 32, 3.0f);
    Tensor lse = Tensor::empty(alloc, DType::F32, {1});
    Tensor chosen = Tensor::empty(alloc, DType::F32, {1});
    Tensor token = Tensor::empty(alloc, DType::I32, {1});
    Tensor status = Tensor::empty(alloc, DType::I32, {1});
    ops::SamplingParamsRow row;
    row.greedy = 1;
    const int64_t bytes = sizeof(row);
    Tensor params = Tensor::empty(alloc, DType::U8, {bytes});
    ops::upload(ctx, TensorView::contiguous(&row, DType::U8, Device::cpu(), {bytes}), params);
    const auto* p = static_cast<const ops::SamplingParamsRow*>(params.view().data);
    report("sampler greedy V=248320", graph_us([&] {
               ops::logprobs_top_k(ctx, logits, limit, lse, TensorView{}, TensorView{});
               ops::sample_tokens(ctx, logits, limit, p, token, status, logits, chosen);
           }),
           2.0 * 4 * V); // the row read by each op
}

} // namespace

int main(int argc, char** argv) {
    reps = argc > 1 ? std::stoi(argv[1]) : 20;
    ctx = ops::ExecContext::cuda(0, DType::BF16);
    auto stream = ops::create_stream(ctx.device); // graphs cannot capture the legacy stream
    ctx.stream = stream.get();
    ops::bind_device(ctx);
    small_ops();
    gdn_core(32);
    gdn_core(48);
    // 35B-A3B at bf16 / int8 / fp8 KV side by side, up to a 128k context; 27B at bf16.
    for (int32_t len : {2048, 8192, 32768, 131072})
        for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8, ops::KvDtype::Fp8})
            attention_decode(16, 2, len, kv);
    attention_decode(24, 4, 2048);
    attention_decode(24, 4, 8192);
    attention_prep_decode(16, 2, 12352); // 35B-A3B
    moe_decode();
    sampler_greedy();
    // 35B-A3B: GDN in/out, attention in/out, router, shared expert, head; 27B: GDN in/out,
    // attention in, MLP gate_up/down, head. Each at 1, 2, 4 and 8 rows (decode, speculative
    // verification, small batches) through both routes, to set the row-count boundary.
    struct LinearShape {
        const char* what;
        int64_t N, K;
        DType y_dtype;
    };
    const LinearShape linear_shapes[] = {
        {"35b gdn_in", 12352, 2048, DType::BF16},
        {"35b gdn_out", 2048, 4096, DType::BF16},
        {"35b attn_in", 9216, 2048, DType::BF16},
        {"35b router", 257, 2048, DType::F32},
        {"35b shared_gate_up", 1024, 2048, DType::BF16},
        {"35b shared_down", 2048, 512, DType::BF16},
        {"35b lm_head", 248320, 2048, DType::F32},
        {"27b gdn_in", 16480, 5120, DType::BF16},
        {"27b gdn_out", 5120, 6144, DType::BF16},
        {"27b attn_in", 14336, 5120, DType::BF16},
        {"27b mlp_gate_up", 34816, 5120, DType::BF16},
        {"27b mlp_down", 5120, 17408, DType::BF16},
        {"27b lm_head", 248320, 5120, DType::F32},
    };
    for (const LinearShape& s : linear_shapes)
        for (int64_t T : {1, 2, 4, 8}) linear_routes(s.what, T, s.N, s.K, s.y_dtype);
    return 0;
}
