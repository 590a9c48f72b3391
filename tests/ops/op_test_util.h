// Helpers shared by the op tests: CPU contexts, tensors from literal values, ragged batches.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "ops/exec_context.h"
#include "ops/seq_batch.h"

namespace ninfer::test {

inline const ops::ExecContext kRef = ops::ExecContext::cpu(ops::CpuMode::Reference);
inline const ops::ExecContext kFast = ops::ExecContext::cpu(ops::CpuMode::Fast);

// An owning F32 tensor holding values in row-major order.
inline Tensor f32_tensor(std::initializer_list<int64_t> dims, const std::vector<float>& values) {
    Tensor t = zeros(dims);
    EXPECT_EQ(t.numel(), int64_t(values.size())) << "f32_tensor: value count";
    for (size_t i = 0; i < values.size() && int64_t(i) < t.numel(); ++i)
        t.ptr<float>()[i] = values[i];
    return t;
}

// An owning 1-D I32 tensor.
inline Tensor i32_tensor(const std::vector<int32_t>& values) {
    Tensor t = zeros({int64_t(values.size())}, DType::I32);
    for (size_t i = 0; i < values.size(); ++i) t.ptr<int32_t>()[i] = values[i];
    return t;
}

// Every element of a view as float, row-major.
inline std::vector<float> floats(const TensorView& v) {
    std::vector<double> d = to_doubles(v);
    return std::vector<float>(d.begin(), d.end());
}

// Sets every element of an F32 tensor to NaN (memory an op must neither read nor write).
inline void fill_nan(const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
        t.ptr<float>()[i] = std::numeric_limits<float>::quiet_NaN();
}

// Rows [begin, begin + count) of a view.
inline TensorView rows(const TensorView& v, int64_t begin, int64_t count) {
    return v.narrow(0, begin, count);
}

// One sequence of a ragged batch: its rows in this call, its first position, its state slot and
// (for paged attention) its KV block ids in order.
struct SeqSpec {
    int32_t rows = 0;
    int32_t pos_begin = 0;
    int32_t slot = 0;
    std::vector<int32_t> blocks = {};
};

// A SeqBatch over host arrays it owns; on the CPU the device views alias the host arrays.
// Not copyable or movable: the SeqBatch points into its members.
class HostBatch {
public:
    explicit HostBatch(const std::vector<SeqSpec>& seqs, int32_t block_size = 16) {
        row_begin_.push_back(0);
        size_t stride = 1;
        for (const SeqSpec& s : seqs) stride = std::max(stride, s.blocks.size());
        for (const SeqSpec& s : seqs) {
            row_begin_.push_back(row_begin_.back() + s.rows);
            pos_begin_.push_back(s.pos_begin);
            slot_.push_back(s.slot);
            for (size_t i = 0; i < stride; ++i)
                table_.push_back(i < s.blocks.size() ? s.blocks[i] : -1);
            b_.max_rows_per_seq = std::max(b_.max_rows_per_seq, s.rows);
            b_.max_context = std::max(b_.max_context, s.pos_begin + s.rows);
        }
        const int64_t S = int64_t(seqs.size());
        b_.num_seqs = int32_t(S);
        b_.num_rows = row_begin_.back();
        b_.host_row_begin = row_begin_.data();
        b_.host_pos_begin = pos_begin_.data();
        b_.host_state_slot = slot_.data();
        b_.host_block_table = table_.data();
        b_.block_table_stride = int32_t(stride);
        b_.block_size = block_size;
        const Device cpu = Device::cpu();
        b_.row_begin = TensorView::contiguous(row_begin_.data(), DType::I32, cpu, {S + 1});
        b_.pos_begin = TensorView::contiguous(pos_begin_.data(), DType::I32, cpu, {S});
        b_.state_slot = TensorView::contiguous(slot_.data(), DType::I32, cpu, {S});
        b_.block_table =
            TensorView::contiguous(table_.data(), DType::I32, cpu, {S, int64_t(stride)});
    }
    HostBatch(const HostBatch&) = delete;
    HostBatch& operator=(const HostBatch&) = delete;

    operator const ops::SeqBatch&() const { return b_; }
    int32_t num_rows() const { return b_.num_rows; }
    // Per-row state snapshots (seq_batch.h): sequence s writes the state after its row i to
    // state row rows[s] + i (-1: none).
    void set_snapshot_rows(std::vector<int32_t> rows) {
        snapshot_ = std::move(rows);
        b_.host_snapshot_row = snapshot_.data();
        b_.snapshot_row = TensorView::contiguous(snapshot_.data(), DType::I32, Device::cpu(),
                                                 {int64_t(snapshot_.size())});
    }

private:
    std::vector<int32_t> row_begin_, pos_begin_, slot_, table_, snapshot_;
    ops::SeqBatch b_;
};

} // namespace ninfer::test
