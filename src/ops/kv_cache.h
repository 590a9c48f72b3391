// KvPlane: one plane (K or V) of one attention layer's paged KV cache, as the attention ops take
// it (kv_cache_write, attention_prep, paged_attention):
//   data:  [NB, bs, nKV, D] contiguous: the activation dtype (F32 or BF16; scale empty), or the
//          codes of a quantized codec (ops/kv_codec.h): I8 (int8) or F8E4M3 (fp8);
//   scale: [NB, bs, nKV, G] contiguous, the codec's scale dtype (F16 for int8, F32 for fp8),
//          G = the codec's groups(D).
// A layer's K and V planes always share one KvDtype (the ops check it). Tensor and TensorView
// convert implicitly, so callers of unquantized caches pass their tensors unchanged.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace ninfer::ops {

// --kv-dtype: Activation stores K and V in the activation dtype ("bf16" on CUDA; the CPU
// backend's activations are F32), Int8 and Fp8 are the codecs of ops/kv_codec.h.
enum class KvDtype : uint8_t { Activation, Int8, Fp8 };

// Parses "bf16" (or "auto", "activation") | "int8" | "fp8"; anything else is an error naming it.
KvDtype parse_kv_dtype(std::string_view name);
// "bf16" / "f32" (the activation dtype's name), "int8", "fp8".
const char* kv_dtype_name(KvDtype dtype, DType activation);
// The dtype of a plane's data, and of its scales (F32 for Activation: unused).
DType kv_code_dtype(KvDtype dtype, DType activation);
DType kv_scale_dtype(KvDtype dtype);
// Scales per (token, kv head) row: 0 for Activation.
int64_t kv_scale_groups(KvDtype dtype, int64_t head_dim);
// Bytes of one (token, kv head) row of one plane: codes plus scales.
int64_t kv_row_bytes(KvDtype dtype, DType activation, int64_t head_dim);

struct KvPlane {
    TensorView data;
    TensorView scale; // empty unless quantized

    KvPlane() = default;
    KvPlane(const TensorView& dense) : data(dense) {}
    KvPlane(const Tensor& dense) : data(dense.view()) {}
    static KvPlane quantized(const TensorView& codes, const TensorView& scale) {
        KvPlane p(codes);
        p.scale = scale;
        return p;
    }

    KvDtype dtype() const {
        return data.dtype == DType::I8       ? KvDtype::Int8
               : data.dtype == DType::F8E4M3 ? KvDtype::Fp8
                                             : KvDtype::Activation;
    }
    bool quantized() const { return dtype() != KvDtype::Activation; }
    int64_t size(int dim) const { return data.size(dim); }
    int64_t nbytes() const { return data.nbytes() + (quantized() ? scale.nbytes() : 0); }
    // Blocks [begin, begin + count) of the plane (codes and scales).
    KvPlane blocks(int64_t begin, int64_t count) const;
};

// Checks a layer's K and V planes for `op`: same shape and KvDtype, contiguous, the scales'
// dtype and shape [NB, bs, nKV, G]; for Activation, data is a float dtype. Errors name `op`.
void check_kv_planes(const char* op, const KvPlane& k, const KvPlane& v);

} // namespace ninfer::ops
