#include "ops/attention.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

void check_cache(const ExecContext& ctx, const char* op, const TensorView& k_cache,
                 const TensorView& v_cache, const SeqBatch& batch) {
    for (auto [name, t] : {std::pair{"k_cache", &k_cache}, {"v_cache", &v_cache}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_contiguous(op, name, *t);
    }
    check_shape(op, "k_cache", k_cache, {-1, batch.block_size, -1, -1});
    check_shape(op, "v_cache", v_cache,
                {k_cache.size(0), k_cache.size(1), k_cache.size(2), k_cache.size(3)});
}

} // namespace

void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const TensorView& k_cache, const TensorView& v_cache) {
    constexpr const char* op = "kv_cache_write";
    check_cache(ctx, op, k_cache, v_cache, batch);
    for (auto [name, t] : {std::pair{"k", &k}, {"v", &v}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
        check_shape(op, name, *t, {-1, k_cache.size(2), k_cache.size(3)});
    }
    require(v.size(0) == k.size(0), op, ": k and v row counts differ");
    check_seq_batch(op, batch, k.size(0), -1, k_cache.size(0));
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&k, &v, &k_cache, &v_cache});
        return cpu::kv_cache_write(ctx.cpu_mode, k, v, batch, k_cache, v_cache);
    case DeviceType::Cuda:
        check_cuda_float(op, {&k, &v, &k_cache, &v_cache});
        return cuda::kv_cache_write(ctx, k, v, batch, k_cache, v_cache);
    }
    no_backend(op, ctx);
}

void paged_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k_cache,
                     const TensorView& v_cache, const SeqBatch& batch, float scale,
                     const TensorView& out) {
    constexpr const char* op = "paged_attention";
    check_cache(ctx, op, k_cache, v_cache, batch);
    for (auto [name, t] : {std::pair{"q", &q}, {"out", &out}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
    }
    check_shape(op, "q", q, {-1, -1, k_cache.size(3)});
    check_shape(op, "out", out, {q.size(0), q.size(1), q.size(2)});
    require(q.size(1) % k_cache.size(2) == 0, op, ": ", q.size(1),
            " query heads are not a multiple of ", k_cache.size(2), " kv heads");
    check_seq_batch(op, batch, q.size(0), -1, k_cache.size(0));
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&q, &k_cache, &v_cache, &out});
        return cpu::paged_attention(ctx.cpu_mode, q, k_cache, v_cache, batch, scale, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&q, &k_cache, &v_cache, &out});
        return cuda::paged_attention(ctx, q, k_cache, v_cache, batch, scale, out);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
