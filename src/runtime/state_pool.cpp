#include "runtime/state_pool.h"

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

DType parse_gdn_state_dtype(const std::string& name) {
    if (name == "f32" || name == "float32") return DType::F32;
    if (name == "bf16" || name == "bfloat16") return DType::BF16;
    fail(ErrorCategory::InvalidArgument, "--gdn-state-dtype: expected f32 or bf16, got '", name,
         "'");
}

StatePool::StatePool(const model::CacheSpec& spec, int32_t rows, Device device, DType conv_dtype)
    : rows_(rows) {
    require(rows > 0, "StatePool: need at least one row");
    Allocator& a = ops::device_allocator(device);
    for (int64_t l = 0; l < spec.gdn_layers; ++l) {
        conv_.push_back(
            Tensor::empty(a, conv_dtype, {rows, spec.conv_channels, spec.conv_history}));
        recurrent_.push_back(Tensor::empty(a, spec.recurrent_dtype,
                                           {rows, spec.value_heads, spec.key_head_dim,
                                            spec.value_head_dim}));
        conv_views_.push_back(conv_.back().view());
        recurrent_views_.push_back(recurrent_.back().view());
    }
}

int64_t StatePool::bytes_per_row(const model::CacheSpec& spec, DType conv_dtype) {
    return spec.gdn_layers *
           (spec.conv_channels * spec.conv_history * dtype_size(conv_dtype) +
            spec.value_heads * spec.key_head_dim * spec.value_head_dim *
                dtype_size(spec.recurrent_dtype));
}

int64_t StatePool::bytes() const {
    int64_t n = 0;
    for (const auto& v : conv_views_) n += v.nbytes();
    for (const auto& v : recurrent_views_) n += v.nbytes();
    return n;
}

int64_t StatePool::row_bytes() const {
    return bytes() / rows_;
}

std::vector<TensorView> StatePool::row_views(int32_t row) const {
    require(row >= 0 && row < rows_, "StatePool: row ", row, " outside [0, ", rows_, ")");
    std::vector<TensorView> out;
    for (const TensorView& v : conv_views_) out.push_back(v.narrow(0, row, 1));
    for (const TensorView& v : recurrent_views_) out.push_back(v.narrow(0, row, 1));
    return out;
}

void StatePool::zero_row(const ops::ExecContext& ctx, int32_t row) const {
    for (const TensorView& v : row_views(row)) ops::fill_zero(ctx, v);
}

void StatePool::copy_row(const ops::ExecContext& ctx, int32_t src, int32_t dst) const {
    ops::copy_many(ctx, row_views(src), row_views(dst)); // one batch for every layer's tensors
}

void StatePool::download_row(const ops::ExecContext& ctx, int32_t row, uint8_t* host) const {
    for (const TensorView& v : row_views(row)) {
        ops::download(ctx, v, TensorView::contiguous(host, v.dtype, Device::cpu(), v.shape.data(), v.ndim));
        host += v.nbytes();
    }
}

void StatePool::upload_row(const ops::ExecContext& ctx, const uint8_t* host, int32_t row) const {
    for (const TensorView& v : row_views(row)) {
        ops::upload(ctx,
                    TensorView::contiguous(const_cast<uint8_t*>(host), v.dtype, Device::cpu(),
                                           v.shape.data(), v.ndim),
                    v);
        host += v.nbytes();
    }
}

} // namespace ninfer::runtime
