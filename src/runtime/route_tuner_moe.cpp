// `ninfer tune`'s prefill-side decisions (route_tuner.h): moe_block.* over the 35B's block in
// three weight formats, moe_experts.bf16 / .fp8 over its experts' grouped GEMMs, and
// attention_prefill.bf16 over its attention heads on one prompt.
#include <cmath>

#include "ops/attention.h"
#include "ops/moe.h"
#include "runtime/route_tuner_bench.h"

namespace ninfer::runtime::tuning {
namespace {

// The 35B's MoE block in one weight format.
struct MoeWeights {
    std::vector<Tensor> keep;
    ops::WeightView egu, edown, sgu, sdown;
};
constexpr int64_t kTopK = 8;

MoeWeights moe_weights(Bench& b, RouteId id) {
    const int64_t kE = std::max<int64_t>(b.dim(256), 2 * kTopK), kH = b.dim(2048),
                  kI = b.dim(512);
    MoeWeights m;
    auto add = [&](Tensor t) {
        m.keep.push_back(std::move(t));
        return m.keep.back().view();
    };
    if (id == RouteId::MoeBlockDense) {
        m.egu = add(b.random(b.act, {kE, 2 * kI, kH}, 41, 0.0f, 0.02f));
        m.edown = add(b.random(b.act, {kE, kH, kI}, 42, 0.0f, 0.02f));
        m.sgu = add(b.random(b.act, {2 * kI, kH}, 43, 0.0f, 0.02f));
        m.sdown = add(b.random(b.act, {kH, kI}, 44, 0.0f, 0.02f));
    } else if (id == RouteId::MoeBlockFp8) {
        auto fp8 = [&](const Bench::Dims& dims, const Bench::Dims& sdims, uint64_t seed) {
            const TensorView q = add(b.random_bytes(DType::F8E4M3, dims, seed, not_fp8_nan));
            const TensorView s = add(b.random(DType::F32, sdims, seed + 1, 1e-3f, 1e-4f));
            return ops::WeightView::fp8(q, s, 128, 128);
        };
        m.egu = fp8({kE, 2 * kI, kH}, {kE, blocks128(2 * kI), blocks128(kH)}, 51);
        m.edown = fp8({kE, kH, kI}, {kE, blocks128(kH), blocks128(kI)}, 53);
        m.sgu = fp8({2 * kI, kH}, {blocks128(2 * kI), blocks128(kH)}, 55);
        m.sdown = fp8({kH, kI}, {blocks128(kH), blocks128(kI)}, 57);
    } else {
        constexpr int64_t G = 32;
        auto q4 = [&](const Bench::Dims& shape, uint64_t seed) {
            Bench::Dims cdims = shape, sdims = shape;
            cdims.back() /= 2;
            sdims.back() /= G;
            const TensorView codes = add(b.random_bytes(DType::U8, cdims, seed, any_byte));
            const TensorView scale = add(b.f16_scales(sdims, 0.002f, seed));
            return ops::WeightView::grouped(codes, scale, 4, G, shape.back());
        };
        m.egu = q4({kE, 2 * kI, kH}, 61);
        m.edown = q4({kE, kH, kI}, 63);
        m.sgu = q4({2 * kI, kH}, 65);
        m.sdown = q4({kH, kI}, 67);
    }
    return m;
}

// moe_block with the stacks of m over decision id's values (pairs: tokens x top-8), each kernel
// of the decision forced in turn.
void measure_moe_block(Bench& b, const MoeWeights& m, RouteId id, Measurements& out) {
    const int64_t kE = m.egu.size(0), kH = m.egu.size(2);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t pairs : tune_values(id, b.o.quick)) {
        const int64_t T = pairs / kTopK;
        const Tensor h = b.random(b.act, {T, kH}, 71, 0.0f, 1.0f);
        const Tensor logits = b.random(DType::F32, {T, kE + 1}, 72, 0.0f, 2.0f);
        const Tensor y = b.random(b.act, {T, kH}, 73, 0.0f, 1.0f);
        b.measure(id, pairs, [&] {
            ops::moe_block(b.ctx, h, logits, kTopK, m.egu, m.edown, m.sgu, m.sdown, y);
        }, ms);
    }
    b.report(id, ms);
}

} // namespace

void tune_moe_block(Bench& b, RouteId id, Measurements& out) {
    measure_moe_block(b, moe_weights(b, id), id, out);
}

// moe_experts' grouped route on bf16 stacks of the 35B's shapes (E = 256, H = 2048, I = 512):
// the mma.sync tiles against the wgmma grouped GEMM, from a few rows per expert to a prefill chunk.
void tune_moe_experts(Bench& b, Measurements& out) {
    const RouteId id = RouteId::MoeExpertsBf16;
    const MoeWeights m = moe_weights(b, RouteId::MoeBlockDense); // the bf16 stacks
    const TensorView gu = m.egu.w, down = m.edown.w;
    const int64_t kE = gu.size(0), kH = gu.size(2);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t pairs : tune_values(id, b.o.quick)) {
        const int64_t T = pairs / kTopK;
        const Tensor x = b.random(b.act, {T, kH}, 83, 0.0f, 1.0f);
        const Tensor logits = b.random(DType::F32, {T, kE}, 84, 0.0f, 2.0f);
        const Tensor w = b.empty(DType::F32, {T, kTopK}), ids = b.empty(DType::I32, {T, kTopK});
        ops::moe_route(b.ctx, logits, kTopK, w, ids);
        const Tensor y = b.random(b.act, {T, kH}, 85, 0.0f, 1.0f);
        b.measure(id, pairs, [&] { ops::moe_experts(b.ctx, x, gu, down, ids, w, y); }, ms);
    }
    b.report(id, ms);
}

// moe_experts' grouped route on block-wise fp8 stacks of the 35B's shapes, through moe_block
// (past its fused decode kernels the composition runs the grouped route): the mma.sync tiles on
// bf16 activations against the W8A8 wgmma grouped GEMM.
void tune_moe_experts_fp8(Bench& b, Measurements& out) {
    measure_moe_block(b, moe_weights(b, RouteId::MoeBlockFp8), RouteId::MoeExpertsFp8, out);
}

// paged_attention's prefill route on one fresh prompt of T rows, the 35B's heads (16 query, 2
// KV, head dim 256) over planes of 16-token blocks, bf16 (attention_prefill.bf16) or int8 codes
// that kv_cache_write fills from random rows (attention_prefill.coded): the flash kernel against
// cuDNN's fused attention (where libcudnn loads). On the CPU, shrunk, the prompt is T / shrink
// rows.
void tune_attention_prefill(Bench& b, ops::KvDtype kv, Measurements& out) {
    const bool coded = kv != ops::KvDtype::Activation;
    const RouteId id = coded ? RouteId::AttentionPrefillCoded : RouteId::AttentionPrefillBf16;
    constexpr int32_t kBlock = 16;
    const int64_t nH = b.dim(16), nKV = std::max<int64_t>(b.dim(2), 1), D = b.dim(256);
    std::vector<RouteMeasurement>& ms = out[size_t(id)];
    for (int64_t value : tune_values(id, b.o.quick)) {
        const int32_t T = int32_t(b.o.shrink > 1 ? std::max<int64_t>(value / b.o.shrink, 16)
                                                 : value);
        const int32_t blocks = (T + kBlock - 1) / kBlock;
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        for (int32_t i = 0; i < blocks; ++i) table[size_t(i)] = i;
        int32_t rows[2] = {0, T}, zero[1] = {0};
        const Tensor d_rows = b.from_host(DType::I32, {2}, rows);
        const Tensor d_zero = b.from_host(DType::I32, {1}, zero);
        const Tensor d_table = b.from_host(DType::I32, {1, blocks}, table.data());
        ops::SeqBatch batch;
        batch.num_seqs = 1;
        batch.num_rows = batch.max_rows_per_seq = batch.max_context = T;
        batch.host_row_begin = rows;
        batch.host_pos_begin = batch.host_state_slot = zero;
        batch.host_block_table = table.data();
        batch.block_table_stride = blocks;
        batch.block_size = kBlock;
        batch.row_begin = d_rows.view();
        batch.pos_begin = batch.state_slot = d_zero.view();
        batch.block_table = d_table.view();
        const Tensor q = b.random(b.act, {T, nH, D}, 91, 0.0f, 1.0f);
        const DType code = ops::kv_code_dtype(kv, b.act);
        const Tensor kc = coded ? b.empty(code, {blocks, kBlock, nKV, D})
                                : b.random(b.act, {blocks, kBlock, nKV, D}, 92, 0.0f, 1.0f);
        const Tensor vc = coded ? b.empty(code, {blocks, kBlock, nKV, D})
                                : b.random(b.act, {blocks, kBlock, nKV, D}, 93, 0.0f, 1.0f);
        ops::KvPlane kp(kc), vp(vc);
        Tensor k_scale, v_scale;
        if (coded) { // the prompt's own rows, encoded
            const std::vector<int64_t> scales{blocks, kBlock, nKV, ops::kv_scale_groups(kv, D)};
            k_scale = b.empty(ops::kv_scale_dtype(kv), scales);
            v_scale = b.empty(ops::kv_scale_dtype(kv), scales);
            kp = ops::KvPlane::quantized(kc.view(), k_scale.view());
            vp = ops::KvPlane::quantized(vc.view(), v_scale.view());
            ops::kv_cache_write(b.ctx, b.random(b.act, {T, nKV, D}, 92, 0.0f, 1.0f),
                                b.random(b.act, {T, nKV, D}, 93, 0.0f, 1.0f), batch, kp, vp);
        }
        const Tensor o = b.empty(b.act, {T, nH, D});
        const float scale = 1.0f / std::sqrt(float(D));
        b.measure(
            id, value, [&] { ops::paged_attention(b.ctx, q, kp, vp, batch, scale, o); }, ms);
    }
    b.report(id, ms);
}

} // namespace ninfer::runtime::tuning
