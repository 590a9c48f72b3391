// StatePool: the device tensors of the GDN conv and recurrent state of every GDN layer, in rows
// ([rows, C, K-1] in the conv dtype and [rows, Hv, dk, dv] in spec.recurrent_dtype per layer).
// The engine lays out sequence slots, the decode-graph padding row and prefix-cache snapshot
// rows in it; a row moves as a whole (zero, copy to another row, to or from a host buffer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

// --gdn-state-dtype: "f32" / "float32" -> F32, "bf16" / "bfloat16" -> BF16 (vLLM spells its
// --mamba-ssm-cache-dtype values the long way); anything else is an InvalidArgument.
DType parse_gdn_state_dtype(const std::string& name);

class StatePool {
public:
    StatePool(const model::CacheSpec& spec, int32_t rows, Device device, DType conv_dtype);

    int32_t num_rows() const { return rows_; }
    // Bytes of one row over every layer.
    static int64_t bytes_per_row(const model::CacheSpec& spec, DType conv_dtype);
    int64_t row_bytes() const;

    void zero_row(const ops::ExecContext& ctx, int32_t row) const;
    void copy_row(const ops::ExecContext& ctx, int32_t src, int32_t dst) const;
    // host: row_bytes() bytes, the layers' conv then recurrent rows in order.
    void download_row(const ops::ExecContext& ctx, int32_t row, uint8_t* host) const;
    void upload_row(const ops::ExecContext& ctx, const uint8_t* host, int32_t row) const;

    int64_t bytes() const;
    const std::vector<TensorView>& conv_views() const { return conv_views_; }
    const std::vector<TensorView>& recurrent_views() const { return recurrent_views_; }

private:
    std::vector<TensorView> row_views(int32_t row) const;

    int32_t rows_;
    std::vector<Tensor> conv_, recurrent_;
    std::vector<TensorView> conv_views_, recurrent_views_;
};

} // namespace ninfer::runtime
