#include "ops/attention_prep.h"

#include "ops/attention.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

constexpr const char* kOp = "attention_prep";

// attention_prep as the composition that defines it (the CPU body and CUDA's route for the shapes
// the fused kernel refuses). Arguments are validated by attention_prep; each op checks its own.
void attention_prep_composed(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                             const TensorView& v_in, const TensorView& q_norm,
                             const TensorView& k_norm, float eps, const TensorView& positions,
                             int64_t rotary_dim, double theta, const SeqBatch& batch,
                             const TensorView& q, const TensorView& k, const KvPlane& k_cache,
                             const KvPlane& v_cache) {
    rms_norm(ctx, q_in, q_norm, eps, q);
    rms_norm(ctx, k_in, k_norm, eps, k);
    rope(ctx, q, positions, rotary_dim, theta);
    rope(ctx, k, positions, rotary_dim, theta);
    kv_cache_write(ctx, k, v_in, batch, k_cache, v_cache);
}

// Checks attention_prep's arguments against its contract.
void check_attention_prep(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                          const TensorView& v_in, const TensorView& q_norm,
                          const TensorView& k_norm, const TensorView& positions, int64_t rotary_dim,
                          double theta, const SeqBatch& batch, const TensorView& q,
                          const TensorView& k, const KvPlane& k_cache,
                          const KvPlane& v_cache) {
    for (auto [name, t] : {std::pair{"q_in", &q_in},
                           {"k_in", &k_in},
                           {"v_in", &v_in},
                           {"q_norm", &q_norm},
                           {"k_norm", &k_norm},
                           {"q", &q},
                           {"k", &k}}) {
        check_device(ctx, kOp, name, *t);
        check_float(kOp, name, *t);
        check_rows_contiguous(kOp, name, *t);
    }
    check_shape(kOp, "q_in", q_in, {-1, -1, -1});
    const int64_t T = q_in.size(0), nH = q_in.size(1), D = q_in.size(2);
    check_shape(kOp, "k_in", k_in, {T, -1, D});
    const int64_t nKV = k_in.size(1);
    check_shape(kOp, "v_in", v_in, {T, nKV, D});
    check_shape(kOp, "q_norm", q_norm, {D});
    check_shape(kOp, "k_norm", k_norm, {D});
    check_device(ctx, kOp, "positions", positions);
    check_dtype(kOp, "positions", positions, DType::I32);
    check_shape(kOp, "positions", positions, {T});
    require(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= D, kOp, ": rotary_dim ",
            rotary_dim, " must be even and within head dim ", D);
    require(theta > 0, kOp, ": theta must be positive");
    check_shape(kOp, "q", q, {T, nH, D});
    check_shape(kOp, "k", k, {T, nKV, D});
    check_kv_planes(kOp, k_cache, v_cache);
    check_device(ctx, kOp, "k_cache", k_cache.data);
    check_device(ctx, kOp, "v_cache", v_cache.data);
    check_shape(kOp, "k_cache", k_cache.data, {-1, batch.block_size, nKV, D});
    check_seq_batch(kOp, batch, T, -1, k_cache.size(0));
}

} // namespace

void attention_prep(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                    const TensorView& v_in, const TensorView& q_norm, const TensorView& k_norm,
                    float eps, const TensorView& positions, int64_t rotary_dim, double theta,
                    const SeqBatch& batch, const TensorView& q, const TensorView& k,
                    const KvPlane& k_cache, const KvPlane& v_cache) {
    check_attention_prep(ctx, q_in, k_in, v_in, q_norm, k_norm, positions, rotary_dim, theta, batch,
                         q, k, k_cache, v_cache);
    if (q_in.size(0) == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(kOp, {&q_in, &k_in, &v_in, &q_norm, &k_norm, &q, &k});
        if (!k_cache.quantized()) check_cpu_f32(kOp, {&q, &k_cache.data, &v_cache.data});
        return attention_prep_composed(ctx, q_in, k_in, v_in, q_norm, k_norm, eps, positions,
                                       rotary_dim, theta, batch, q, k, k_cache, v_cache);
    case DeviceType::Cuda:
        check_cuda_float(kOp, {&q_in, &k_in, &v_in, &q_norm, &k_norm, &q, &k});
        if (!k_cache.quantized()) check_cuda_float(kOp, {&q, &k_cache.data, &v_cache.data});
        if (cuda::attention_prep_fused_fits(q_in, k_in, v_in, q_norm, k_norm, rotary_dim, q,
                                            k_cache, v_cache))
            return cuda::attention_prep_fused(ctx, q_in, k_in, v_in, q_norm, k_norm, eps, positions,
                                              rotary_dim, theta, batch, q, k_cache, v_cache);
        return attention_prep_composed(ctx, q_in, k_in, v_in, q_norm, k_norm, eps, positions,
                                       rotary_dim, theta, batch, q, k, k_cache, v_cache);
    }
    no_backend(kOp, ctx);
}

} // namespace ninfer::ops
