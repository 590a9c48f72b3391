#include "model/weight_cut.h"

#include <cstring>

#include "core/error.h"
#include "ops/memory.h"
#include "ops/weight.h"

namespace ninfer::model {
namespace {

// Whether every run starts on a multiple of `unit` and spans whole units (the last one may end
// at `total`, a partial unit).
bool lined_up(const Runs& runs, int64_t unit, int64_t total) {
    for (const RankRange& r : runs)
        if (r.begin % unit != 0 || (r.count % unit != 0 && r.begin + r.count != total))
            return false;
    return true;
}

// The runs in units of `unit` (their scale blocks, groups or code bytes).
Runs in_units(const Runs& runs, int64_t unit) {
    Runs out;
    for (const RankRange& r : runs) out.push_back({r.begin / unit, (r.count + unit - 1) / unit});
    return out;
}

int64_t total_count(const Runs& runs) {
    int64_t n = 0;
    for (const RankRange& r : runs) n += r.count;
    return n;
}

// An fp8 weight's runs, kept fp8, or an empty weight when they do not line up with the blocks.
Weight cut_fp8(const ops::ExecContext& ctx, const Weight& w, int dim, const Runs& runs) {
    const int nd = w.w.view().ndim;
    const int64_t block = dim == nd - 2 ? w.block_rows : w.block_cols;
    if (!lined_up(runs, block, w.w.view().size(dim))) return {};
    Weight out;
    out.block_rows = w.block_rows;
    out.block_cols = w.block_cols;
    out.w = cut_tensor(ctx, w.w.view(), dim, runs);
    out.scale = cut_tensor(ctx, w.scale.view(), dim, in_units(runs, block));
    return out;
}

// A groupwise weight's runs, kept groupwise, or an empty weight when columns do not line up with
// the groups or with the bytes of 4-bit codes (two a byte).
Weight cut_grouped(const ops::ExecContext& ctx, const Weight& w, int dim, const Runs& runs) {
    const int nd = w.w.view().ndim;
    Weight out;
    out.group_bits = w.group_bits;
    out.group_size = w.group_size;
    out.cols = w.cols;
    if (dim == nd - 2) { // rows: one scale row a code row
        out.w = cut_tensor(ctx, w.w.view(), dim, runs);
        out.scale = cut_tensor(ctx, w.scale.view(), dim, runs);
        return out;
    }
    const int64_t per_byte = w.group_bits == 4 ? 2 : 1;
    if (!lined_up(runs, w.group_size, w.cols) || !lined_up(runs, per_byte, w.cols)) return {};
    out.w = cut_tensor(ctx, w.w.view(), dim, in_units(runs, per_byte));
    out.scale = cut_tensor(ctx, w.scale.view(), dim, in_units(runs, w.group_size));
    out.cols = total_count(runs);
    return out;
}

} // namespace

Tensor cut_tensor(const ops::ExecContext& ctx, const TensorView& t, int dim, const Runs& runs) {
    require(t.device.is_cpu() && t.is_contiguous(), "tensor parallelism: ", t.describe(),
            " is not a contiguous host tensor");
    int64_t outer = 1, inner = 1, kept = 0;
    for (int d = 0; d < dim; ++d) outer *= t.size(d);
    for (int d = dim + 1; d < t.ndim; ++d) inner *= t.size(d);
    for (const RankRange& r : runs) {
        require(r.begin >= 0 && r.begin + r.count <= t.size(dim), "tensor parallelism: run [",
                r.begin, ", +", r.count, ") outside dim ", dim, " of ", t.describe());
        kept += r.count;
    }
    int64_t dims[kMaxDims];
    for (int d = 0; d < t.ndim; ++d) dims[d] = d == dim ? kept : t.size(d);
    const int64_t esize = dtype_size(t.dtype);
    std::vector<uint8_t> host(size_t(outer * kept * inner * esize));
    const auto* src = static_cast<const uint8_t*>(t.data);
    uint8_t* dst = host.data();
    for (int64_t o = 0; o < outer; ++o)
        for (const RankRange& r : runs) {
            const int64_t bytes = r.count * inner * esize;
            std::memcpy(dst, src + ((o * t.size(dim) + r.begin) * inner) * esize, size_t(bytes));
            dst += bytes;
        }
    Tensor out = Tensor::empty(ops::device_allocator(ctx.device), t.dtype, dims, t.ndim);
    ops::upload(ctx, TensorView::contiguous(host.data(), t.dtype, Device::cpu(), dims, t.ndim),
                out.view());
    ops::synchronize(ctx); // host dies here
    return out;
}

Weight cut_weight(const ops::ExecContext& ctx, const Weight& w, WeightAxis axis, const Runs& runs) {
    if (!w.defined()) return {};
    if (axis == WeightAxis::Experts) { // codes and scales alike have one leading expert dim
        require(w.w.view().ndim == 3, "expert parallelism: ", w.w.view().describe(),
                " is not a stack of experts");
        Weight out;
        out.block_rows = w.block_rows, out.block_cols = w.block_cols;
        out.group_bits = w.group_bits, out.group_size = w.group_size, out.cols = w.cols;
        out.w = cut_tensor(ctx, w.w.view(), 0, runs);
        if (w.scale.defined()) out.scale = cut_tensor(ctx, w.scale.view(), 0, runs);
        return out;
    }
    const int dim = w.w.view().ndim - (axis == WeightAxis::Rows ? 2 : 1);
    if (!w.is_fp8() && !w.is_grouped()) return Weight(cut_tensor(ctx, w.w.view(), dim, runs));
    Weight out = w.is_fp8() ? cut_fp8(ctx, w, dim, runs) : cut_grouped(ctx, w, dim, runs);
    if (out.defined()) return out;
    // The runs split scale blocks or groups: dequantize exactly, then cut in the compute dtype.
    const ops::HostDense dense = ops::dense_on_host(w);
    const TensorView& f32 = dense.view;
    int64_t dims[kMaxDims];
    for (int d = 0; d < f32.ndim; ++d) dims[d] = f32.size(d);
    Tensor host = Tensor::empty(cpu_allocator(), ctx.dtype, dims, f32.ndim);
    ops::upload(ops::ExecContext::cpu(), f32, host.view()); // rounds to ctx.dtype once
    return Weight(cut_tensor(ctx, host.view(), dim, runs));
}

} // namespace ninfer::model
