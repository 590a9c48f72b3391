// Helpers for the CUDA tests (label cuda): moving tensors between the host and the device,
// device SeqBatches, and the bf16 tolerance presets. Each CUDA route is compared with the CPU
// reference (FP64 accumulation) run on the same (rounded) inputs.
#pragma once

#include <memory>
#include <vector>

#include "common/test_util.h"
#include "ops/exec_context.h"
#include "ops/memory.h"
#include "ops/seq_batch.h"

namespace ninfer::test {

inline const ops::ExecContext kCpuRef = ops::ExecContext::cpu(ops::CpuMode::Reference);

// bf16 inputs are rounded before both paths run, so these cover bf16 outputs and activations
// rounded inside the kernel (about 3 significant digits), not input rounding.
inline constexpr Tolerance kBf16Elementwise{"bf16_elementwise", 8e-3, 2e-2};
inline constexpr Tolerance kBf16Reduction{"bf16_reduction", 1e-2, 4e-2};
// f32 on CUDA against FP64: ordering and fast-math intrinsics (__expf) differ.
inline constexpr Tolerance kCudaF32{"cuda_f32", 2e-5, 2e-4};

inline ops::ExecContext cuda_ctx(DType dtype) {
    ops::ExecContext ctx = ops::ExecContext::cuda(0, dtype);
    ops::bind_device(ctx);
    return ctx;
}

// Host F32 tensor rounded through dtype (so the CPU reference sees the device's exact inputs).
inline Tensor rounded(const TensorView& host, DType dtype) {
    Tensor t = clone(host);
    if (dtype == DType::BF16)
        for (int64_t i = 0; i < t.numel(); ++i)
            t.ptr<float>()[i] = bf16_to_float(float_to_bf16(t.ptr<float>()[i]));
    return t;
}

// A device copy of a contiguous host tensor, converted to dtype (integers keep their dtype).
inline Tensor to_device(const ops::ExecContext& ctx, const TensorView& host, DType dtype) {
    const DType d = is_float(host.dtype) ? dtype : host.dtype;
    Tensor t = Tensor::empty(ops::device_allocator(ctx.device), d, host.shape.data(), host.ndim);
    ops::upload(ctx, host, t);
    return t;
}

// A host F32 (or integer) copy of a contiguous device tensor.
inline Tensor to_host(const ops::ExecContext& ctx, const TensorView& dev) {
    const DType d = is_float(dev.dtype) ? DType::F32 : dev.dtype;
    Tensor t = Tensor::empty(cpu_allocator(), d, dev.shape.data(), dev.ndim);
    ops::synchronize(ctx);
    ops::download(ctx, dev, t);
    return t;
}

// A ragged batch whose arrays exist on the host (for the CPU) and on the device (for CUDA).
struct SeqSpecD {
    int32_t rows = 0;
    int32_t pos_begin = 0;
    int32_t slot = 0;
    std::vector<int32_t> blocks = {};
};

class DualBatch {
public:
    DualBatch(const ops::ExecContext& ctx, const std::vector<SeqSpecD>& seqs,
              int32_t block_size = 16) {
        row_begin_.push_back(0);
        size_t stride = 1;
        for (const auto& s : seqs) stride = std::max(stride, s.blocks.size());
        for (const auto& s : seqs) {
            row_begin_.push_back(row_begin_.back() + s.rows);
            pos_begin_.push_back(s.pos_begin);
            slot_.push_back(s.slot);
            for (size_t i = 0; i < stride; ++i)
                table_.push_back(i < s.blocks.size() ? s.blocks[i] : 0);
            host_.max_rows_per_seq = std::max(host_.max_rows_per_seq, s.rows);
            host_.max_context = std::max(host_.max_context, s.pos_begin + s.rows);
        }
        const int64_t S = int64_t(seqs.size());
        host_.num_seqs = int32_t(S);
        host_.num_rows = row_begin_.back();
        host_.host_row_begin = row_begin_.data();
        host_.host_pos_begin = pos_begin_.data();
        host_.host_state_slot = slot_.data();
        host_.host_block_table = table_.data();
        host_.block_table_stride = int32_t(stride);
        host_.block_size = block_size;
        auto view = [](std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
            return TensorView::contiguous(v.data(), DType::I32, Device::cpu(), dims);
        };
        host_.row_begin = view(row_begin_, {S + 1});
        host_.pos_begin = view(pos_begin_, {S});
        host_.state_slot = view(slot_, {S});
        host_.block_table = view(table_, {S, int64_t(stride)});
        device_ = host_;
        d_row_begin_ = to_device(ctx, host_.row_begin, DType::I32);
        d_pos_begin_ = to_device(ctx, host_.pos_begin, DType::I32);
        d_slot_ = to_device(ctx, host_.state_slot, DType::I32);
        d_table_ = to_device(ctx, host_.block_table, DType::I32);
        device_.row_begin = d_row_begin_;
        device_.pos_begin = d_pos_begin_;
        device_.state_slot = d_slot_;
        device_.block_table = d_table_;
    }
    DualBatch(const DualBatch&) = delete;
    DualBatch& operator=(const DualBatch&) = delete;

    const ops::SeqBatch& host() const { return host_; }
    const ops::SeqBatch& device() const { return device_; }

private:
    std::vector<int32_t> row_begin_, pos_begin_, slot_, table_;
    ops::SeqBatch host_, device_;
    Tensor d_row_begin_, d_pos_begin_, d_slot_, d_table_;
};

} // namespace ninfer::test
