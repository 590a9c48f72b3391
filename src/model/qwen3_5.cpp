#include "model/qwen3_5.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/finite_trace.h"
#include "model/weight_loader.h"
#include "ops/attention.h"
#include "ops/attention_prep.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gated_delta_rule.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/moe.h"
#include "ops/rms_norm.h"
#include "ops/rope_table.h"
#include "model/rope_angles.h"

namespace ninfer::model {
namespace {

TensorView cols(const TensorView& v, int64_t begin, int64_t count) {
    return v.narrow(1, begin, count);
}

// mRoPE's axis of frequency j (MODEL_QWEN3_5.md §4, HF's interleaved recomposition).
int mrope_axis(const io::ModelConfig& c, int64_t j) {
    if (j % 3 == 1 && j < 3 * c.mrope_section[1]) return 1;
    if (j % 3 == 2 && j < 3 * c.mrope_section[2]) return 2;
    return 0;
}

} // namespace

// Activation buffers, sized for `capacity` rows and reused across calls.
struct Qwen35Model::Scratch {
    int64_t capacity = 0;
    int64_t generation = 0;
    Tensor x, h, proj, conv_out, g, beta, core, q, k, attn, gate_up, act, router, selected;
    Tensor mtp_in; // [T, 2H]: the MTP's [embedding | hidden] (allocated on first MTP use)
    Tensor iota;   // [T] I32 0, 1, ..: the row ids of the feature taps' strided copies
    Tensor head_part; // [capacity, V_r] F32: a tensor-parallel rank's logit columns (first use)

    void ensure(const io::ModelConfig& c, Device device, DType dt, int64_t rows) {
        if (rows <= capacity) return;
        capacity = std::max<int64_t>(rows, 2 * capacity);
        ++generation;
        Allocator& a = ops::device_allocator(device);
        const int64_t T = capacity, H = c.hidden_size, D = c.head_dim;
        const int64_t gdn_in = c.conv_dim() + c.value_dim() + 2 * c.linear_num_value_heads;
        const int64_t attn_in = (2 * c.num_heads + 2 * c.num_kv_heads) * D;
        const int64_t inter = c.intermediate_size; // dense MLP only: moe_block has its own scratch
        x = Tensor::empty(a, dt, {T, H});
        h = Tensor::empty(a, dt, {T, H});
        proj = Tensor::empty(a, dt, {T, std::max(gdn_in, attn_in)});
        conv_out = Tensor::empty(a, dt, {T, c.conv_dim()});
        g = Tensor::empty(a, DType::F32, {T, c.linear_num_value_heads});
        beta = Tensor::empty(a, DType::F32, {T, c.linear_num_value_heads});
        core = Tensor::empty(a, dt, {T, c.linear_num_value_heads, c.linear_value_head_dim});
        q = Tensor::empty(a, dt, {T, c.num_heads, D});
        k = Tensor::empty(a, dt, {T, c.num_kv_heads, D});
        attn = Tensor::empty(a, dt, {T, c.num_heads, D});
        gate_up = Tensor::empty(a, dt, {T, 2 * inter});
        act = Tensor::empty(a, dt, {T, inter});
        router = Tensor::empty(a, DType::F32, {T, router_rows(c.num_experts)});
        selected = Tensor::empty(a, dt, {T, H});
        mtp_in = Tensor();
        iota = Tensor();
        head_part = Tensor();
        rope_cos = Tensor();
        rope_sin = Tensor();
    }

    Tensor rope_cos, rope_sin; // [rows, rotary_dim / 2] F32: a batch's RoPE tables (first use)

    // The first T rows of rope_cos / rope_sin (allocated for the capacity on first use).
    RopeTables rope_rows(Device device, int64_t half, int64_t T) {
        if (!rope_cos.defined()) {
            Allocator& a = ops::device_allocator(device);
            rope_cos = Tensor::empty(a, DType::F32, {capacity, half});
            rope_sin = Tensor::empty(a, DType::F32, {capacity, half});
        }
        return {rope_cos.view().narrow(0, 0, T), rope_sin.view().narrow(0, 0, T)};
    }

    TensorView row_ids(const ops::ExecContext& ctx, int64_t rows) {
        if (!iota.defined()) {
            iota = Tensor::empty(ops::device_allocator(ctx.device), DType::I32, {capacity});
            std::vector<int32_t> ids(static_cast<size_t>(capacity));
            for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
            ops::upload(ctx,
                        TensorView::contiguous(ids.data(), DType::I32, Device::cpu(), {capacity}),
                        iota.view());
        }
        return iota.view().narrow(0, 0, rows);
    }

    TensorView head_columns(Device device, int64_t width, int64_t rows) {
        if (!head_part.defined())
            head_part = Tensor::empty(ops::device_allocator(device), DType::F32, {capacity, width});
        return head_part.view().narrow(0, 0, rows);
    }

    TensorView mtp_input(Device device, DType dt, int64_t H, int64_t rows) {
        if (!mtp_in.defined())
            mtp_in = Tensor::empty(ops::device_allocator(device), dt, {capacity, 2 * H});
        return mtp_in.view().narrow(0, 0, rows);
    }
};

namespace {

int64_t layer_bytes(const LayerWeights& l) {
    int64_t n = 0;
    for (const Tensor* t : {&l.input_norm, &l.post_norm, &l.gdn.conv, &l.gdn.A_log,
                            &l.gdn.dt_bias, &l.gdn.norm, &l.attn.q_norm, &l.attn.k_norm,
                            &l.mlp.router})
        if (t->defined()) n += t->view().nbytes();
    for (const Weight* w : {&l.gdn.in_proj, &l.gdn.in_proj_ba, &l.gdn.out_proj, &l.attn.in_proj,
                            &l.attn.o_proj, &l.mlp.gate_up, &l.mlp.down, &l.mlp.experts_gate_up,
                            &l.mlp.experts_down, &l.mlp.shared_gate_up, &l.mlp.shared_down})
        if (w->defined()) n += w->nbytes();
    return n;
}

int64_t total_bytes(const ModelWeights& w) {
    int64_t n = w.embed.view().nbytes() + w.final_norm.view().nbytes();
    if (w.lm_head.view().data != w.embed.view().data) n += w.lm_head.view().nbytes();
    for (const auto& l : w.layers) n += layer_bytes(l);
    if (w.mtp.fc.defined()) n += w.mtp.fc.nbytes();
    for (const Tensor* t : {&w.mtp.pre_fc_norm_embedding, &w.mtp.pre_fc_norm_hidden, &w.mtp.norm})
        if (t->defined()) n += t->view().nbytes();
    for (const auto& l : w.mtp.layers) n += layer_bytes(l);
    const VisionWeights& v = w.vision;
    for (const Tensor* t : {&v.patch_w, &v.patch_b, &v.pos_embed, &v.merger_norm_w,
                            &v.merger_norm_b, &v.merger_fc1_w, &v.merger_fc1_b, &v.merger_fc2_w,
                            &v.merger_fc2_b})
        if (t->defined()) n += t->view().nbytes();
    for (const VisionBlockWeights& b : v.blocks)
        for (const Tensor* t : {&b.norm1_w, &b.norm1_b, &b.norm2_w, &b.norm2_b, &b.qkv_w, &b.qkv_b,
                                &b.proj_w, &b.proj_b, &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b})
            n += t->view().nbytes();
    return n;
}

} // namespace

Qwen35Model::Qwen35Model(io::ModelConfig config, ModelWeights weights, Device device,
                         MlpPlacement placement)
    : config_(std::move(config)), weights_(std::move(weights)), device_(device),
      weight_bytes_(total_bytes(weights_)), scratch_(std::make_unique<Scratch>()),
      placement_(std::move(placement)) {
    for (const ops::ExecContext& on : placement_.devices) {
        require(on.device.type == device_.type, "MlpPlacement: a ", device_name(on.device),
                " block for a model on ", device_name(device_));
        placed_scratch_.push_back(std::make_unique<Scratch>());
    }
    if (weights_.vision.loaded())
        vision_ = std::make_unique<VisionEncoder>(config_, weights_.vision, device_);
}

// Verification rows run up to 15 drafts past a sequence's last position, and a graph's padding
// rows sit at the first positions: the position tables reach this far past the context limit.
constexpr int64_t kRopeTableSlack = 64;

Qwen35Model::RopeTables Qwen35Model::rope_tables(const ops::ExecContext& ctx,
                                                 const ForwardBatch& batch) {
    if (batch.host_mrope_positions) return mrope_tables(ctx, batch);
    const io::ModelConfig& c = config_;
    if (!scaled_rope(c)) return {};
    const int64_t T = batch.tokens.size(0), half = c.rotary_dim / 2;
    if (!rope_position_cos_.defined()) {
        const int64_t rows = (context_limit_ > 0 ? context_limit_ : c.position_limit) +
                             kRopeTableSlack;
        std::vector<float> cos, sin;
        rope_angle_tables(c, rows, [](int64_t t, int64_t) { return t; }, cos, sin);
        Allocator& a = ops::device_allocator(device_);
        rope_position_cos_ = Tensor::empty(a, DType::F32, {rows, half});
        rope_position_sin_ = Tensor::empty(a, DType::F32, {rows, half});
        ops::upload(ctx, TensorView::contiguous(cos.data(), DType::F32, Device::cpu(), {rows, half}),
                    rope_position_cos_.view());
        ops::upload(ctx, TensorView::contiguous(sin.data(), DType::F32, Device::cpu(), {rows, half}),
                    rope_position_sin_.view());
    }
    const RopeTables r = scratch_->rope_rows(device_, half, T);
    ops::embedding(ctx, batch.positions, rope_position_cos_.view(), r.cos);
    ops::embedding(ctx, batch.positions, rope_position_sin_.view(), r.sin);
    return r;
}

// cos/sin [T, rotary_dim / 2] of the batch's 3-axis positions (rope_angles.h): the angle of
// frequency j takes the position on mrope_axis(j), so a row whose axes agree gets exactly plain
// RoPE's angles.
Qwen35Model::RopeTables Qwen35Model::mrope_tables(const ops::ExecContext& ctx,
                                                  const ForwardBatch& batch) {
    if (!batch.host_mrope_positions) return {};
    const io::ModelConfig& c = config_;
    const int64_t T = batch.tokens.size(0), half = c.rotary_dim / 2;
    const int32_t* pos = batch.host_mrope_positions;
    std::vector<float> cos, sin;
    rope_angle_tables(
        c, T, [&](int64_t t, int64_t j) { return int64_t(pos[mrope_axis(c, j) * T + t]); }, cos,
        sin);
    const RopeTables r = scratch_->rope_rows(device_, half, T);
    ops::upload(ctx, TensorView::contiguous(cos.data(), DType::F32, Device::cpu(), {T, half}),
                r.cos);
    ops::upload(ctx, TensorView::contiguous(sin.data(), DType::F32, Device::cpu(), {T, half}),
                r.sin);
    return r;
}

VisionEncoder& Qwen35Model::vision() {
    require(vision_ != nullptr, "this checkpoint has no vision tower (model.visual.*)");
    return *vision_;
}

std::unique_ptr<Qwen35Model> Qwen35Model::random(const io::ModelConfig& config,
                                                 const ops::ExecContext& ctx, uint64_t seed,
                                                 Residency resident,
                                                 const MlpPlacement& placement) {
    return std::make_unique<Qwen35Model>(
        config, random_weights(config, ctx, seed, resident, placement), ctx.device, placement);
}

int64_t Qwen35Model::scratch_generation() const {
    int64_t g = scratch_->generation;
    for (const auto& s : placed_scratch_) g += s->generation; // each only grows
    return g;
}

bool Qwen35Model::capturable(const ops::ExecContext& ctx, int64_t rows) const {
    // Tensor parallelism: only with a collective that enqueues without host waits.
    if (ctx.device.is_cpu() || (shard_.active() && !shard_.collective->capturable())) return false;
    const io::ModelConfig& c = config_;
    return !c.moe || ops::moe_block_capturable(ctx, rows, c.num_experts_per_tok, c.hidden_size,
                                               c.moe_intermediate_size);
}

int64_t Qwen35Model::scratch_bytes() const {
    const Scratch& s = *scratch_;
    int64_t n = 0;
    for (const Tensor* t : {&s.x, &s.h, &s.proj, &s.conv_out, &s.g, &s.beta, &s.core, &s.q, &s.k,
                            &s.attn, &s.gate_up, &s.act, &s.router, &s.selected, &s.mtp_in})
        if (t->defined()) n += t->view().nbytes();
    if (vision_) n += vision_->scratch_bytes();
    return n;
}

Qwen35Model::~Qwen35Model() = default;

std::unique_ptr<Qwen35Model> Qwen35Model::load(const std::filesystem::path& dir,
                                               const ops::ExecContext& ctx, Residency resident,
                                               const LoadProgress& progress,
                                               const MlpPlacement& placement) {
    io::ModelConfig config = io::load_hf_config(dir);
    io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(dir);
    ModelWeights weights = load_weights(config, ckpt, ctx, resident, progress,
                                        kLoadProgressStepBytes, placement);
    return std::make_unique<Qwen35Model>(std::move(config), std::move(weights), ctx.device,
                                         placement);
}

CacheSpec Qwen35Model::cache_spec(bool with_mtp) const {
    const io::ModelConfig& c = config_;
    require(!with_mtp || has_mtp(), "this checkpoint has no MTP weights (mtp.*)");
    return {c.count_layers(LayerKind::FullAttention),
            c.num_kv_heads,
            c.head_dim,
            c.count_layers(LayerKind::LinearAttention),
            c.conv_dim(),
            c.linear_conv_kernel - 1,
            c.linear_num_value_heads,
            c.linear_key_head_dim,
            c.linear_value_head_dim,
            with_mtp ? int64_t(weights_.mtp.layers.size()) : 0};
}

void Qwen35Model::gdn_layer(const ops::ExecContext& ctx, const LayerWeights& w,
                            const ForwardBatch& batch, const TensorView& conv_state,
                            const TensorView& recurrent_state) {
    const io::ModelConfig& c = config_;
    Scratch& s = *scratch_;
    const int64_t T = batch.tokens.size(0), C = c.conv_dim(), Vd = c.value_dim();
    const int64_t Hv = c.linear_num_value_heads;
    TensorView x = s.x.view().narrow(0, 0, T), h = s.h.view().narrow(0, 0, T);
    TensorView proj = cols(s.proj.view().narrow(0, 0, T), 0, C + Vd + 2 * Hv);
    // proj columns: qkv [0, C), z [C, C + Vd), b [C + Vd, C + Vd + Hv), a (the next Hv).
    if (!w.gdn.in_proj_ba.defined()) {
        ops::rms_norm_linear(ctx, x, w.input_norm, float(c.rms_norm_eps), w.gdn.in_proj, proj, h);
    } else { // fp8 qkv | z, dense b | a: two products of the same normalised rows
        ops::rms_norm_linear_pair(ctx, x, w.input_norm, float(c.rms_norm_eps), w.gdn.in_proj,
                                  cols(proj, 0, C + Vd), w.gdn.in_proj_ba,
                                  cols(proj, C + Vd, 2 * Hv), h);
    }
    TensorView core = s.core.view().narrow(0, 0, T);
    ops::gdn_core(ctx, cols(proj, 0, C), cols(proj, C, Vd), cols(proj, C + Vd, Hv),
                  cols(proj, C + Vd + Hv, Hv), w.gdn.conv, w.gdn.A_log, w.gdn.dt_bias, w.gdn.norm,
                  float(c.rms_norm_eps), batch.seqs, conv_state, recurrent_state,
                  s.conv_out.view().narrow(0, 0, T), s.g.view().narrow(0, 0, T),
                  s.beta.view().narrow(0, 0, T), core);
    ops::linear(ctx, core.reshape({T, Vd}), w.gdn.out_proj, x, adds_residual());
    reduce_residual(ctx, x);
}

void Qwen35Model::attention_layer(const ops::ExecContext& ctx, const LayerWeights& w,
                                  const ForwardBatch& batch, const ops::KvPlane& k_cache,
                                  const ops::KvPlane& v_cache, const RopeTables& rope) {
    const io::ModelConfig& c = config_;
    Scratch& s = *scratch_;
    const int64_t T = batch.tokens.size(0), D = c.head_dim, nH = c.num_heads, nKV = c.num_kv_heads;
    TensorView x = s.x.view().narrow(0, 0, T), h = s.h.view().narrow(0, 0, T);
    TensorView proj = cols(s.proj.view().narrow(0, 0, T), 0, (2 * nH + 2 * nKV) * D);
    ops::rms_norm_linear(ctx, x, w.input_norm, float(c.rms_norm_eps), w.attn.in_proj, proj, h);
    // q_proj rows are per head [query (D) | gate (D)]; then k (nKV*D), then v (nKV*D). q/k norms,
    // RoPE and the cache write: q is the output, k scratch (the cache keeps the keys).
    TensorView q = s.q.view().narrow(0, 0, T), k = s.k.view().narrow(0, 0, T);
    if (!rope.cos.empty()) { // mRoPE: attention_prep's composition with per-row angles
        ops::rms_norm(ctx, proj.split_heads(0, nH, D, 2 * D), w.attn.q_norm, float(c.rms_norm_eps),
                      q);
        ops::rms_norm(ctx, proj.split_heads(2 * nH * D, nKV, D, D), w.attn.k_norm,
                      float(c.rms_norm_eps), k);
        ops::rope_table(ctx, q, rope.cos, rope.sin, c.rotary_dim);
        ops::rope_table(ctx, k, rope.cos, rope.sin, c.rotary_dim);
        ops::kv_cache_write(ctx, k, proj.split_heads((2 * nH + nKV) * D, nKV, D, D), batch.seqs,
                            k_cache, v_cache);
    } else {
        ops::attention_prep(ctx, proj.split_heads(0, nH, D, 2 * D),
                        proj.split_heads(2 * nH * D, nKV, D, D),
                        proj.split_heads((2 * nH + nKV) * D, nKV, D, D), w.attn.q_norm,
                        w.attn.k_norm, float(c.rms_norm_eps), batch.positions, c.rotary_dim,
                        c.rope_theta, batch.seqs, q, k, k_cache, v_cache);
    }
    TensorView attn = s.attn.view().narrow(0, 0, T);
    // The scale uses the full head dim (not the rotary dim).
    ops::paged_attention(ctx, q, k_cache, v_cache, batch.seqs, float(1.0 / std::sqrt(double(D))),
                         attn);
    ops::sigmoid_mul(ctx, attn, proj.split_heads(D, nH, D, 2 * D), attn);
    ops::linear(ctx, attn.reshape({T, nH * D}), w.attn.o_proj, x, adds_residual());
    reduce_residual(ctx, x);
}

void Qwen35Model::mlp_block(const ops::ExecContext& ctx, Scratch& s, const LayerWeights& w,
                            int64_t T) {
    const io::ModelConfig& c = config_;
    TensorView x = s.x.view().narrow(0, 0, T), h = s.h.view().narrow(0, 0, T);
    const float eps = float(c.rms_norm_eps);
    if (!c.moe) {
        const int64_t I = w.mlp.down.size(1);
        TensorView gu = cols(s.gate_up.view().narrow(0, 0, T), 0, 2 * I);
        TensorView act = cols(s.act.view().narrow(0, 0, T), 0, I);
        ops::rms_norm_linear(ctx, x, w.post_norm, eps, w.mlp.gate_up, gu, h);
        ops::silu_mul(ctx, gu, act);
        ops::linear(ctx, act, w.mlp.down, x, adds_residual());
        reduce_residual(ctx, x);
        return;
    }
    // Router logits: E experts, then the shared expert's gate (one [router_rows(E), H] matrix
    // whose padding rows give zero columns that nothing reads).
    TensorView router = s.router.view().narrow(0, 0, T);
    ops::rms_norm_linear(ctx, x, w.post_norm, eps, w.mlp.router, router, h);
    if (!adds_residual()) ops::fill_zero(ctx, x); // moe_block always adds into x
    ops::moe_block(ctx, h, router.narrow(1, 0, c.num_experts + 1), c.num_experts_per_tok,
                   w.mlp.experts_gate_up, w.mlp.experts_down, w.mlp.shared_gate_up,
                   w.mlp.shared_down, x, c.first_held_expert);
    reduce_residual(ctx, x);
}

void Qwen35Model::reduce_residual(const ops::ExecContext& ctx, const TensorView& x) {
    if (shard_.active()) shard_.collective->all_reduce_sum(ctx, x);
}

void Qwen35Model::head(const ops::ExecContext& ctx, const TensorView& selected,
                       const TensorView& logits, bool norm) {
    const io::ModelConfig& c = config_;
    const int64_t R = selected.size(0);
    if (R == 0) return; // no row wants logits (every rank has the same R)
    TensorView h = scratch_->h.view().narrow(0, 0, R);
    const TensorView out =
        shard_.active() ? scratch_->head_columns(device_, weights_.lm_head.size(0), R) : logits;
    if (norm)
        ops::rms_norm_linear(ctx, selected, weights_.final_norm, float(c.rms_norm_eps),
                             weights_.lm_head, out, h);
    else
        ops::linear(ctx, selected, weights_.lm_head, out, /*accumulate=*/false);
    if (shard_.active()) shard_.collective->gather_columns(ctx, out, logits, 0);
}

void Qwen35Model::project_rank(const ops::ExecContext& ctx, const TensorView& rows,
                               const TensorView& logits) {
    scratch_->ensure(config_, device_, ctx.dtype, rows.size(0));
    head(ctx, rows, logits, /*norm=*/false);
}

TensorView Qwen35Model::head_prefix(int64_t n) const {
    // Rank 0's head holds the vocabulary rows [0, its run) (shard_head), so a prefix within it
    // is a view; one device holds every row.
    if (n > weights_.lm_head.size(0) || shard_.rank != 0) return {};
    return weights_.lm_head.view().narrow(0, 0, n);
}

Qwen35Model::Scratch& Qwen35Model::placed_scratch(int64_t layer) {
    return *placed_scratch_[size_t(placement_.layer_device[size_t(layer)])];
}

void Qwen35Model::placed_mlp_block(const ops::ExecContext& ctx, const ops::ExecContext& on,
                                   Scratch& s, const LayerWeights& w, int64_t T) {
    const TensorView x = scratch_->x.view().narrow(0, 0, T), there = s.x.view().narrow(0, 0, T);
    ops::copy_across(ctx, x, on, there);
    ops::stream_wait(on, ctx);
    ops::bind_device(on); // its allocations (the MoE composition's scratch) on its stream
    mlp_block(on, s, w, T);
    ops::copy_across(on, there, ctx, x);
    ops::bind_device(ctx);
    ops::stream_wait(ctx, on);
}

void Qwen35Model::forward_rank(const ops::ExecContext& ctx, const ForwardBatch& batch,
                               const CacheViews& caches, const TensorView& logits) {
    const io::ModelConfig& c = config_;
    const int64_t T = batch.tokens.size(0), R = batch.logit_rows.size(0);
    require(T > 0, "forward: empty batch");
    require(ctx.device == device_, "forward: model lives on ", device_name(device_),
            ", context is ", device_name(ctx.device));
    require(int64_t(caches.k_cache.size()) == c.count_layers(LayerKind::FullAttention) &&
                int64_t(caches.conv_state.size()) == c.count_layers(LayerKind::LinearAttention),
            "forward: cache views do not match the model's layers");
    scratch_->ensure(c, device_, ctx.dtype, std::max(T, R));
    if (!placed_scratch_.empty()) { // each device's scratch from its own allocator and stream
        for (size_t d = 0; d < placed_scratch_.size(); ++d) {
            ops::bind_device(placement_.devices[d]);
            placed_scratch_[d]->ensure(c, placement_.devices[d].device, ctx.dtype, T);
        }
        ops::bind_device(ctx);
    }
    Scratch& s = *scratch_;
    ops::embedding(ctx, batch.tokens, weights_.embed, s.x.view().narrow(0, 0, T));
    for (const ForwardBatch::MediaRows& m : batch.media) {
        require(m.row >= 0 && m.row + m.embeds.size(0) <= T && m.embeds.size(1) == c.hidden_size,
                "forward: media rows ", m.row, " + ", m.embeds.describe(), " outside the batch");
        ops::copy(ctx, m.embeds, s.x.view().narrow(0, m.row, m.embeds.size(0)));
    }
    const RopeTables rope = rope_tables(ctx, batch);
    size_t attn_rank = 0, gdn_rank = 0;
    require(batch.features.empty() ||
                (batch.features.size(0) == T &&
                 batch.features.size(1) == int64_t(batch.feature_layers.size()) * c.hidden_size),
            "forward: feature buffer ", batch.features.describe(), " does not match ", T,
            " rows of ", batch.feature_layers.size(), " taps");
    int32_t layer_index = 0;
    FiniteTrace trace(batch.seqs);
    const bool tracing = FiniteTrace::enabled();
    for (const LayerWeights& w : weights_.layers) {
        if (w.kind == LayerKind::LinearAttention) {
            gdn_layer(ctx, w, batch, caches.conv_state[gdn_rank], caches.recurrent_state[gdn_rank]);
            ++gdn_rank;
        } else {
            attention_layer(ctx, w, batch, caches.k_cache[attn_rank], caches.v_cache[attn_rank],
                            rope);
            ++attn_rank;
        }
        if (tracing)
            trace.check(ctx, s.x.view().narrow(0, 0, T), layer_index,
                        w.kind == LayerKind::LinearAttention ? "gdn" : "attention");
        if (const ops::ExecContext* on = placement_.of(layer_index))
            placed_mlp_block(ctx, *on, placed_scratch(layer_index), w, T);
        else
            mlp_block(ctx, s, w, T);
        if (tracing) {
            if (config_.moe)
                trace.check(ctx,
                            s.router.view().narrow(0, 0, T).narrow(1, 0, config_.num_experts + 1),
                            layer_index, "router");
            trace.check(ctx, s.x.view().narrow(0, 0, T), layer_index, "mlp");
        }
        if (!batch.features.empty())
            for (size_t i = 0; i < batch.feature_layers.size(); ++i)
                if (batch.feature_layers[i] == layer_index) // a strided copy: a row gather
                    ops::embedding(ctx, s.row_ids(ctx, T), s.x.view().narrow(0, 0, T),
                                   cols(batch.features, int64_t(i) * c.hidden_size, c.hidden_size));
        ++layer_index;
    }
    if (!batch.hidden_out.empty())
        ops::rms_norm(ctx, s.x.view().narrow(0, 0, T), weights_.final_norm,
                      float(c.rms_norm_eps), batch.hidden_out);
    // Only the requested rows go through the final norm and the head.
    TensorView selected = s.selected.view().narrow(0, 0, R);
    ops::embedding(ctx, batch.logit_rows, s.x.view().narrow(0, 0, T), selected); // row gather
    head(ctx, selected, logits);
}

void Qwen35Model::mtp_forward_rank(const ops::ExecContext& ctx, const ForwardBatch& batch,
                                   const TensorView& hidden, const CacheViews& caches,
                                   const TensorView& draft_hidden, const TensorView& logits) {
    const io::ModelConfig& c = config_;
    const MtpWeights& m = weights_.mtp;
    const int64_t T = batch.tokens.size(0), R = batch.logit_rows.size(0), H = c.hidden_size;
    require(has_mtp(), "mtp_forward: this checkpoint has no MTP weights (mtp.*)");
    require(T > 0, "mtp_forward: empty batch");
    require(caches.mtp_k_cache.size() == m.layers.size(),
            "mtp_forward: the KV pool holds no cache for the MTP layers");
    require(hidden.size(0) == T && hidden.size(1) == H && draft_hidden.size(0) == T,
            "mtp_forward: hidden rows do not match the batch");
    scratch_->ensure(c, device_, ctx.dtype, std::max(T, R));
    Scratch& s = *scratch_;
    const float eps = float(c.rms_norm_eps);
    TensorView x = s.x.view().narrow(0, 0, T), h = s.h.view().narrow(0, 0, T);
    // u = fc([norm_e(embed(token)) | norm_h(hidden)]): the embedding half first.
    TensorView in = s.mtp_input(device_, ctx.dtype, H, T);
    const RopeTables rope = rope_tables(ctx, batch);
    ops::embedding(ctx, batch.tokens, weights_.embed, h);
    for (const ForwardBatch::MediaRows& mr : batch.media) // placeholders embed as the target's
        ops::copy(ctx, mr.embeds, h.narrow(0, mr.row, mr.embeds.size(0)));
    ops::rms_norm(ctx, h, m.pre_fc_norm_embedding, eps, cols(in, 0, H));
    ops::rms_norm(ctx, hidden, m.pre_fc_norm_hidden, eps, cols(in, H, H));
    ops::linear(ctx, in, m.fc, x, /*accumulate=*/false);
    for (size_t i = 0; i < m.layers.size(); ++i) {
        attention_layer(ctx, m.layers[i], batch, caches.mtp_k_cache[i], caches.mtp_v_cache[i],
                        rope);
        mlp_block(ctx, s, m.layers[i], T);
    }
    ops::rms_norm(ctx, x, m.norm, eps, draft_hidden);
    if (R == 0) return;
    TensorView selected = s.selected.view().narrow(0, 0, R);
    ops::embedding(ctx, batch.logit_rows, draft_hidden, selected); // row gather
    head(ctx, selected, logits, /*norm=*/false);
}

} // namespace ninfer::model
