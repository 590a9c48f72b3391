#include "model/finite_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/memory.h"

namespace ninfer::model {

bool FiniteTrace::enabled() {
    static const bool on = [] {
        const char* v = std::getenv("NINFER_FINITE_TRACE");
        return v && *v && std::strcmp(v, "0") != 0;
    }();
    return on;
}

void FiniteTrace::check(const ops::ExecContext& ctx, const TensorView& x, int32_t layer,
                        const char* block) {
    if (!enabled() || reported_ || ops::capturing(ctx)) return; // graph steps go unchecked
    const int64_t rows = x.size(0), cols = x.numel() / std::max<int64_t>(1, rows);
    Tensor host = Tensor::empty(ops::device_allocator(Device::cpu()), x.dtype, {rows, cols});
    ops::download(ctx, x.reshape({rows, cols}), host.view());
    std::vector<float> v(size_t(rows * cols));
    convert_to_f32(host.view().data, x.dtype, v.data(), rows * cols);
    std::vector<int64_t> bad_rows;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            if (!std::isfinite(v[r * cols + c])) {
                bad_rows.push_back(r);
                break;
            }
    if (bad_rows.empty()) return;
    reported_ = true;
    std::string seqs;
    int32_t s = 0, last = -1, listed = 0;
    for (int64_t r : bad_rows) {
        while (s + 1 < seqs_.num_seqs && seqs_.host_row_begin[s + 1] <= r) ++s;
        if (s == last) continue;
        last = s;
        if (++listed > 8) continue;
        seqs += " seq " + std::to_string(s) + " (" + std::to_string(seqs_.rows(s)) +
                " rows from position " + std::to_string(seqs_.host_pos_begin[s]) + ", slot " +
                std::to_string(seqs_.host_state_slot[s]) + ", first bad row +" +
                std::to_string(r - seqs_.host_row_begin[s]) + ");";
    }
    std::fprintf(stderr,
                 "ninfer: finite trace: layer %d %s: %zu of %lld rows non-finite (step of %d "
                 "sequences), in %d sequences:%s\n",
                 layer, block, bad_rows.size(), (long long)rows, seqs_.num_seqs, listed,
                 seqs.c_str());
}

} // namespace ninfer::model
