#include "ops/segment_attention.h"

#include "ops/cpu/vision_ops.h"
#include "ops/cuda/vision_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void segment_attention(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                       const TensorView& v, const int32_t* host_segments,
                       const TensorView& segments, float scale, const TensorView& out) {
    constexpr const char* op = "segment_attention";
    for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
        check_shape(op, name, *t, {q.size(0), q.size(1), q.size(2)});
    }
    check_contiguous(op, "out", out);
    check_device(ctx, op, "segments", segments);
    check_dtype(op, "segments", segments, DType::I32);
    check_shape(op, "segments", segments, {-1});
    check_contiguous(op, "segments", segments);
    require(host_segments != nullptr, op, ": host_segments is null");
    const int64_t T = q.size(0), S = segments.size(0) - 1;
    require(S >= 0 && host_segments[0] == 0 && host_segments[S] == T, op,
            ": segments must run from 0 to T = ", T);
    for (int64_t s = 0; s < S; ++s)
        require(host_segments[s] <= host_segments[s + 1], op, ": segment ", s,
                " ends before it starts");
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&q, &k, &v, &out});
        return cpu::segment_attention(ctx.cpu_mode, q, k, v, host_segments, S, scale, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&q, &k, &v, &out});
        return cuda::segment_attention(ctx, q, k, v, host_segments, segments, scale, out);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
