#include "model/vision.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/bias_act.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/rope_table.h"
#include "ops/segment_attention.h"

namespace ninfer::model {
namespace {

constexpr float kNormEps = 1e-6f; // every LayerNorm of the tower (HF hard-codes it)

// HF's fp32 inverse frequencies of the axial rotary: 1 / theta^(2i / (D/2)), i < D/4, each step
// rounded to f32 as torch computes it (here with correctly rounded pow, as ops/rope.h).
std::vector<float> axial_inv_freq(const io::VisionConfig& v) {
    const int64_t spatial = v.head_dim() / 2;
    std::vector<float> inv;
    const float theta = float(v.rope_theta);
    for (int64_t i = 0; i < spatial; i += 2) {
        const float e = float(i) / float(spatial);
        const float p = float(std::pow(double(theta), double(e)));
        inv.push_back(float(1.0 / double(p)));
    }
    return inv;
}

// One axis of HF's bilinear (align_corners) resampling of the side x side position grid to
// `size` patches: taps (floor, floor + 1) clamped to the grid and their f32 hat weights.
void bilinear_axis(int64_t index, int64_t size, int64_t side, int32_t taps[2], float weights[2]) {
    const float src = float(float(index) * float(side - 1)) / float(std::max<int64_t>(size - 1, 1));
    const float fl = std::floor(src);
    for (int k = 0; k < 2; ++k) {
        const int64_t raw = int64_t(fl) + k;
        taps[k] = int32_t(std::clamp<int64_t>(raw, 0, side - 1));
        const float distance = std::fabs(src - fl - float(k));
        weights[k] = std::max(1.0f - distance, 0.0f);
    }
}

} // namespace

void validate_media_grid(const io::VisionConfig& v, const MediaGrid& g) {
    const int64_t m = v.spatial_merge_size;
    if (g.t < 1 || g.h < m || g.w < m || g.h % m || g.w % m)
        fail_invalid("media grid (", g.t, ", ", g.h, ", ", g.w, ") must have t >= 1 and h, w ",
                     "positive multiples of the spatial merge size ", m);
}

VisionTables vision_tables(const io::VisionConfig& v, const std::vector<MediaGrid>& grids) {
    VisionTables t;
    const std::vector<float> inv = axial_inv_freq(v);
    const int64_t quarter = int64_t(inv.size()), half = 2 * quarter, m = v.spatial_merge_size;
    const int64_t side = v.grid_side();
    t.segments.push_back(0);
    for (const MediaGrid& g : grids) {
        validate_media_grid(v, g);
        for (int64_t f = 0; f < g.t; ++f) {
            // Patch i of a frame, in merge-block order: block (br, bc), in-block (ir, ic).
            for (int64_t i = 0; i < g.h * g.w; ++i) {
                const int64_t ic = i % m, ir = (i / m) % m, bc = (i / (m * m)) % (g.w / m),
                              br = i / (m * m * (g.w / m));
                const int64_t row = br * m + ir, col = bc * m + ic;
                for (int64_t j = 0; j < half; ++j) {
                    const int64_t pos = j < quarter ? row : col;
                    const float angle = float(pos) * inv[size_t(j % quarter)];
                    t.cos.push_back(float(std::cos(double(angle))));
                    t.sin.push_back(float(std::sin(double(angle))));
                }
                int32_t ht[2], wt[2];
                float hw[2], ww[2];
                bilinear_axis(row, g.h, side, ht, hw);
                bilinear_axis(col, g.w, side, wt, ww);
                for (int a = 0; a < 2; ++a)
                    for (int b = 0; b < 2; ++b) {
                        t.pos_index.push_back(ht[a] * int32_t(side) + wt[b]);
                        t.pos_weight.push_back(hw[a] * ww[b]);
                    }
            }
            t.segments.push_back(t.segments.back() + int32_t(g.h * g.w));
        }
    }
    return t;
}

double VisionEncoder::flops(const io::ModelConfig& c, const std::vector<MediaGrid>& grids) {
    const io::VisionConfig& v = c.vision;
    const double D = double(v.hidden_size), I = double(v.intermediate_size);
    const double M = D * double(v.merge_unit());
    double n = 0, attn = 0;
    for (const MediaGrid& g : grids) {
        n += double(g.patches());
        attn += double(g.t) * double(g.h * g.w) * double(g.h * g.w); // pairs within each frame
    }
    const double per_patch_linear = double(v.patch_values()) * D +
                                    double(v.depth) * (3 * D * D + D * D + 2 * D * I);
    const double merger = (M * M + M * double(c.hidden_size)) / double(v.merge_unit());
    return 2.0 * n * (per_patch_linear + merger) + 4.0 * double(v.depth) * attn * D;
}

struct VisionEncoder::Scratch {
    int64_t capacity = 0;
    Tensor x, h, qkv, attn, tmp, fc, merged;
    Tensor cos, sin, pos_index, pos_weight, segments;

    void ensure(const io::ModelConfig& c, Device device, DType dt, int64_t rows) {
        if (rows <= capacity) return;
        capacity = std::max<int64_t>(rows, 2 * capacity);
        Allocator& a = ops::device_allocator(device);
        const io::VisionConfig& v = c.vision;
        const int64_t N = capacity, D = v.hidden_size;
        x = Tensor::empty(a, dt, {N, D});
        h = Tensor::empty(a, dt, {N, D});
        qkv = Tensor::empty(a, dt, {N, 3 * D});
        attn = Tensor::empty(a, dt, {N, D});
        tmp = Tensor::empty(a, dt, {N, D});
        fc = Tensor::empty(a, dt, {N, v.intermediate_size});
        merged = Tensor::empty(a, dt, {N / v.merge_unit() + 1, D * v.merge_unit()});
        cos = Tensor::empty(a, DType::F32, {N, v.head_dim() / 2});
        sin = Tensor::empty(a, DType::F32, {N, v.head_dim() / 2});
        pos_index = Tensor::empty(a, DType::I32, {N, 4});
        pos_weight = Tensor::empty(a, DType::F32, {N, 4});
        segments = Tensor::empty(a, DType::I32, {N + 1});
    }
    int64_t bytes() const {
        int64_t total = 0;
        for (const Tensor* t : {&x, &h, &qkv, &attn, &tmp, &fc, &merged, &cos, &sin, &pos_index,
                                &pos_weight, &segments})
            if (t->defined()) total += t->view().nbytes();
        return total;
    }
};

VisionEncoder::VisionEncoder(const io::ModelConfig& config, const VisionWeights& weights,
                             Device device)
    : config_(config), weights_(weights), device_(device), scratch_(std::make_unique<Scratch>()) {}

VisionEncoder::~VisionEncoder() = default;

int64_t VisionEncoder::scratch_bytes() const { return scratch_->bytes(); }

void VisionEncoder::reserve(const ops::ExecContext& ctx, int64_t patches) {
    scratch_->ensure(config_, device_, ctx.dtype, patches);
}

namespace {

template <typename T>
TensorView upload_rows(const ops::ExecContext& ctx, const std::vector<T>& host, DType dtype,
                       const Tensor& buffer, int64_t rows, int64_t cols) {
    TensorView dst = buffer.view().reshape({buffer.view().numel()}).narrow(0, 0, rows * cols);
    ops::upload(ctx, TensorView::contiguous(const_cast<T*>(host.data()), dtype, Device::cpu(),
                                            {rows * cols}),
                dst);
    return cols == 1 ? dst : dst.reshape({rows, cols});
}

// y = x W^T + b (torch nn.Linear), with an activation.
void linear_bias(const ops::ExecContext& ctx, const TensorView& x, const Tensor& w,
                 const Tensor& b, const TensorView& y, ops::Activation act) {
    ops::linear(ctx, x, w, y);
    ops::bias_act(ctx, y, b, act);
}

} // namespace

void VisionEncoder::block(const ops::ExecContext& ctx, const VisionBlockWeights& w, int64_t N,
                          const std::vector<int32_t>& segments) {
    const io::VisionConfig& v = config_.vision;
    Scratch& s = *scratch_;
    const int64_t D = v.hidden_size, nH = v.num_heads, Dh = v.head_dim();
    TensorView x = s.x.view().narrow(0, 0, N), h = s.h.view().narrow(0, 0, N);
    TensorView tmp = s.tmp.view().narrow(0, 0, N);
    // x += proj(attention(rope(q), rope(k), v)) over layer_norm(x).
    ops::layer_norm(ctx, x, w.norm1_w, w.norm1_b, kNormEps, h);
    TensorView qkv = s.qkv.view().narrow(0, 0, N);
    linear_bias(ctx, h, w.qkv_w, w.qkv_b, qkv, ops::Activation::None);
    // qkv columns: [3, nH, Dh] (q heads, then k heads, then v heads).
    TensorView q = qkv.split_heads(0, nH, Dh), k = qkv.split_heads(D, nH, Dh),
               val = qkv.split_heads(2 * D, nH, Dh);
    const TensorView cos = s.cos.view().narrow(0, 0, N), sin = s.sin.view().narrow(0, 0, N);
    ops::rope_table(ctx, q, cos, sin, Dh);
    ops::rope_table(ctx, k, cos, sin, Dh);
    TensorView attn = s.attn.view().narrow(0, 0, N);
    ops::segment_attention(ctx, q, k, val, segments.data(),
                           s.segments.view().narrow(0, 0, int64_t(segments.size())),
                           float(1.0 / std::sqrt(double(Dh))), attn.reshape({N, nH, Dh}));
    linear_bias(ctx, attn, w.proj_w, w.proj_b, tmp, ops::Activation::None);
    ops::add(ctx, x, tmp, x);
    // x += fc2(gelu_tanh(fc1(layer_norm(x)))).
    ops::layer_norm(ctx, x, w.norm2_w, w.norm2_b, kNormEps, h);
    TensorView fc = s.fc.view().narrow(0, 0, N);
    linear_bias(ctx, h, w.fc1_w, w.fc1_b, fc, ops::Activation::GeluTanh);
    linear_bias(ctx, fc, w.fc2_w, w.fc2_b, tmp, ops::Activation::None);
    ops::add(ctx, x, tmp, x);
}

void VisionEncoder::encode(const ops::ExecContext& ctx, const std::vector<MediaGrid>& grids,
                           const TensorView& pixels, const TensorView& out) {
    const io::VisionConfig& v = config_.vision;
    require(weights_.loaded(), "vision: this checkpoint has no vision tower (model.visual.*)");
    require(ctx.device == device_, "vision: the tower lives on ", device_name(device_));
    const VisionTables t = vision_tables(v, grids); // validates the grids
    int64_t N = 0, merged = 0;
    for (const MediaGrid& g : grids) {
        N += g.patches();
        merged += g.merged(v.spatial_merge_size);
    }
    require(N > 0, "vision: nothing to encode");
    require(pixels.ndim == 2 && pixels.size(0) == N && pixels.size(1) == v.patch_values(),
            "vision: pixels ", pixels.describe(), " do not match the grids (", N, " patches of ",
            v.patch_values(), " values)");
    require(out.ndim == 2 && out.size(0) == merged && out.size(1) == config_.hidden_size,
            "vision: out ", out.describe(), " must be [", merged, ", ", config_.hidden_size, "]");
    scratch_->ensure(config_, device_, ctx.dtype, N);
    Scratch& s = *scratch_;
    const int64_t half = v.head_dim() / 2, S = int64_t(t.segments.size());
    upload_rows(ctx, t.cos, DType::F32, s.cos, N, half);
    upload_rows(ctx, t.sin, DType::F32, s.sin, N, half);
    const TensorView pos_index = upload_rows(ctx, t.pos_index, DType::I32, s.pos_index, N, 4);
    const TensorView pos_weight = upload_rows(ctx, t.pos_weight, DType::F32, s.pos_weight, N, 4);
    upload_rows(ctx, t.segments, DType::I32, s.segments, S, 1);

    TensorView x = s.x.view().narrow(0, 0, N);
    linear_bias(ctx, pixels, weights_.patch_w, weights_.patch_b, x, ops::Activation::None);
    ops::embedding_bag_add(ctx, pos_index, pos_weight, weights_.pos_embed, x);
    for (const VisionBlockWeights& w : weights_.blocks) block(ctx, w, N, t.segments);
    // Merger: layer_norm per patch, then each merge block's patches side by side.
    TensorView h = s.h.view().narrow(0, 0, N);
    ops::layer_norm(ctx, x, weights_.merger_norm_w, weights_.merger_norm_b, kNormEps, h);
    const int64_t M = v.hidden_size * v.merge_unit(), rows = N / v.merge_unit();
    TensorView blocks = h.reshape({rows, M});
    TensorView m = s.merged.view().narrow(0, 0, rows);
    linear_bias(ctx, blocks, weights_.merger_fc1_w, weights_.merger_fc1_b, m,
                ops::Activation::GeluErf);
    linear_bias(ctx, m, weights_.merger_fc2_w, weights_.merger_fc2_b, out, ops::Activation::None);
}

} // namespace ninfer::model
