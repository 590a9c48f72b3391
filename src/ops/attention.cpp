#include "ops/attention.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

void check_cache(const ExecContext& ctx, const char* op, const KvPlane& k_cache,
                 const KvPlane& v_cache, const SeqBatch& batch) {
    check_kv_planes(op, k_cache, v_cache);
    check_device(ctx, op, "k_cache", k_cache.data);
    check_device(ctx, op, "v_cache", v_cache.data);
    check_shape(op, "k_cache", k_cache.data, {-1, batch.block_size, -1, -1});
}

// A backend's dtype rule over two float tensors and the caches (when unquantized: codes have
// their codec's dtype, checked by check_kv_planes).
void check_floats(const char* op, const TensorView& a, const TensorView& b, const KvPlane& k_cache,
                  const KvPlane& v_cache,
                  void (*check)(const char*, std::initializer_list<const TensorView*>)) {
    if (k_cache.quantized()) return check(op, {&a, &b});
    check(op, {&a, &b, &k_cache.data, &v_cache.data});
}

} // namespace

void kv_cache_write(const ExecContext& ctx, const TensorView& k, const TensorView& v,
                    const SeqBatch& batch, const KvPlane& k_cache, const KvPlane& v_cache) {
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
        check_floats(op, k, v, k_cache, v_cache, check_cpu_f32);
        return cpu::kv_cache_write(ctx.cpu_mode, k, v, batch, k_cache, v_cache);
    case DeviceType::Cuda:
        check_floats(op, k, v, k_cache, v_cache, check_cuda_float);
        return cuda::kv_cache_write(ctx, k, v, batch, k_cache, v_cache);
    }
    no_backend(op, ctx);
}

void paged_attention(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                     const KvPlane& v_cache, const SeqBatch& batch, float scale,
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
        check_floats(op, q, out, k_cache, v_cache, check_cpu_f32);
        return cpu::paged_attention(ctx.cpu_mode, q, k_cache, v_cache, batch, scale, out);
    case DeviceType::Cuda:
        check_floats(op, q, out, k_cache, v_cache, check_cuda_float);
        return cuda::paged_attention(ctx, q, k_cache, v_cache, batch, scale, out);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
