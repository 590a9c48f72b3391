#include "ops/embedding.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void embedding(const ExecContext& ctx, const TensorView& ids, const TensorView& table,
               const TensorView& out) {
    constexpr const char* op = "embedding";
    for (auto [name, t] : {std::pair{"ids", &ids}, {"table", &table}, {"out", &out}})
        check_device(ctx, op, name, *t);
    check_dtype(op, "ids", ids, DType::I32);
    check_float(op, "table", table);
    check_float(op, "out", out);
    check_shape(op, "ids", ids, {-1});
    check_shape(op, "table", table, {-1, -1});
    check_shape(op, "out", out, {ids.size(0), table.size(1)});
    check_contiguous(op, "table", table);
    check_rows_contiguous(op, "out", out);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&table, &out});
        return cpu::embedding(ctx.cpu_mode, ids, table, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&table, &out});
        return cuda::embedding(ctx, ids, table, out);
    }
    no_backend(op, ctx);
}

void embedding_bag_add(const ExecContext& ctx, const TensorView& indices, const TensorView& weights,
                       const TensorView& table, const TensorView& out) {
    constexpr const char* op = "embedding_bag_add";
    for (auto [name, t] : {std::pair{"indices", &indices}, {"weights", &weights},
                           {"table", &table}, {"out", &out}})
        check_device(ctx, op, name, *t);
    check_dtype(op, "indices", indices, DType::I32);
    check_dtype(op, "weights", weights, DType::F32);
    check_float(op, "table", table);
    check_float(op, "out", out);
    check_shape(op, "indices", indices, {-1, -1});
    check_shape(op, "weights", weights, {indices.size(0), indices.size(1)});
    check_shape(op, "table", table, {-1, -1});
    check_shape(op, "out", out, {indices.size(0), table.size(1)});
    check_contiguous(op, "indices", indices);
    check_contiguous(op, "weights", weights);
    check_contiguous(op, "table", table);
    check_rows_contiguous(op, "out", out);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&table, &out});
        return cpu::embedding_bag_add(ctx.cpu_mode, indices, weights, table, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&table, &out});
        return cuda::embedding_bag_add(ctx, indices, weights, table, out);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
