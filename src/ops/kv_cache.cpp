#include "ops/kv_cache.h"

#include "core/error.h"
#include "ops/kv_codec.h"
#include "ops/validate.h"

namespace ninfer::ops {

KvDtype parse_kv_dtype(std::string_view name) {
    if (name == "bf16" || name == "auto" || name == "activation") return KvDtype::Activation;
    if (name == "int8") return KvDtype::Int8;
    if (name == "fp8") return KvDtype::Fp8;
    fail_invalid("--kv-dtype: unknown KV cache dtype '", name, "' (bf16, int8 or fp8)");
}

const char* kv_dtype_name(KvDtype dtype, DType activation) {
    switch (dtype) {
    case KvDtype::Int8: return "int8";
    case KvDtype::Fp8: return "fp8";
    case KvDtype::Activation: break;
    }
    return activation == DType::F32 ? "f32" : "bf16";
}

DType kv_code_dtype(KvDtype dtype, DType activation) {
    switch (dtype) {
    case KvDtype::Int8: return kv::Int8G64::kCodeDtype;
    case KvDtype::Fp8: return kv::Fp8PerHead::kCodeDtype;
    case KvDtype::Activation: break;
    }
    return activation;
}

DType kv_scale_dtype(KvDtype dtype) {
    return dtype == KvDtype::Int8 ? kv::Int8G64::kScaleDtype : kv::Fp8PerHead::kScaleDtype;
}

int64_t kv_scale_groups(KvDtype dtype, int64_t head_dim) {
    switch (dtype) {
    case KvDtype::Int8: return kv::Int8G64::groups(int(head_dim));
    case KvDtype::Fp8: return kv::Fp8PerHead::groups(int(head_dim));
    case KvDtype::Activation: break;
    }
    return 0;
}

int64_t kv_row_bytes(KvDtype dtype, DType activation, int64_t head_dim) {
    return head_dim * dtype_size(kv_code_dtype(dtype, activation)) +
           kv_scale_groups(dtype, head_dim) * dtype_size(kv_scale_dtype(dtype));
}

KvPlane KvPlane::blocks(int64_t begin, int64_t count) const {
    KvPlane p(data.narrow(0, begin, count));
    if (quantized()) p.scale = scale.narrow(0, begin, count);
    return p;
}

void check_kv_planes(const char* op, const KvPlane& k, const KvPlane& v) {
    for (auto [name, p] : {std::pair{"k_cache", &k}, {"v_cache", &v}}) {
        check_contiguous(op, name, p->data);
        check_shape(op, name, p->data, {-1, -1, -1, -1});
        if (!p->quantized()) {
            check_float(op, name, p->data);
            continue;
        }
        const KvDtype d = p->dtype();
        check_dtype(op, name, p->scale, kv_scale_dtype(d));
        check_contiguous(op, name, p->scale);
        check_shape(op, name, p->scale,
                    {p->data.size(0), p->data.size(1), p->data.size(2),
                     kv_scale_groups(d, p->data.size(3))});
        require(p->scale.device == p->data.device, op, ": ", name,
                " scales are on another device than its codes");
    }
    require(k.dtype() == v.dtype() && k.data.dtype == v.data.dtype, op,
            ": k_cache and v_cache have different storage (", dtype_name(k.data.dtype), ", ",
            dtype_name(v.data.dtype), ")");
    check_shape(op, "v_cache", v.data,
                {k.data.size(0), k.data.size(1), k.data.size(2), k.data.size(3)});
}

} // namespace ninfer::ops
