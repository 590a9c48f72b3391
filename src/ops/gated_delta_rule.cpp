#include "ops/gated_delta_rule.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {

void gdn_gates(const ExecContext& ctx, const TensorView& a, const TensorView& b,
               const TensorView& A_log, const TensorView& dt_bias, const TensorView& g,
               const TensorView& beta) {
    constexpr const char* op = "gdn_gates";
    for (auto [name, t] : {std::pair{"a", &a},
                           {"b", &b},
                           {"A_log", &A_log},
                           {"dt_bias", &dt_bias},
                           {"g", &g},
                           {"beta", &beta}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
    }
    check_shape(op, "a", a, {-1, -1});
    const int64_t T = a.size(0), Hv = a.size(1);
    check_shape(op, "b", b, {T, Hv});
    check_shape(op, "A_log", A_log, {Hv});
    check_shape(op, "dt_bias", dt_bias, {Hv});
    check_shape(op, "g", g, {T, Hv});
    check_shape(op, "beta", beta, {T, Hv});
    check_dtype(op, "g", g, DType::F32);
    check_dtype(op, "beta", beta, DType::F32);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&a, &b, &A_log, &dt_bias});
        return cpu::gdn_gates(ctx.cpu_mode, a, b, A_log, dt_bias, g, beta);
    case DeviceType::Cuda:
        check_cuda_float(op, {&a, &b, &A_log, &dt_bias});
        return cuda::gdn_gates(ctx, a, b, A_log, dt_bias, g, beta);
    }
    no_backend(op, ctx);
}

void gated_delta_rule(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& g, const TensorView& beta,
                      const SeqBatch& batch, const TensorView& state, const TensorView& out,
                      GdnAlgo algo) {
    constexpr const char* op = "gated_delta_rule";
    for (auto [name, t] : {std::pair{"q", &q},
                           {"k", &k},
                           {"v", &v},
                           {"g", &g},
                           {"beta", &beta},
                           {"state", &state},
                           {"out", &out}}) {
        check_device(ctx, op, name, *t);
        check_float(op, name, *t);
        check_rows_contiguous(op, name, *t);
    }
    check_shape(op, "q", q, {-1, -1, -1});
    const int64_t T = q.size(0), Hk = q.size(1), dk = q.size(2);
    check_shape(op, "k", k, {T, Hk, dk});
    check_shape(op, "v", v, {T, -1, -1});
    const int64_t Hv = v.size(1), dv = v.size(2);
    require(Hv % Hk == 0, op, ": value heads ", Hv, " not a multiple of key heads ", Hk);
    check_shape(op, "g", g, {T, Hv});
    check_shape(op, "beta", beta, {T, Hv});
    check_dtype(op, "g", g, DType::F32);
    check_dtype(op, "beta", beta, DType::F32);
    check_dtype(op, "state", state, DType::F32);
    check_shape(op, "state", state, {-1, Hv, dk, dv});
    check_contiguous(op, "state", state);
    check_shape(op, "out", out, {T, Hv, dv});
    check_contiguous(op, "out", out);
    check_seq_batch(op, batch, T, state.size(0), -1);
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&q, &k, &v, &out});
        return cpu::gated_delta_rule(ctx.cpu_mode, q, k, v, g, beta, batch, state, out, algo);
    case DeviceType::Cuda:
        check_cuda_float(op, {&q, &k, &v, &out});
        return cuda::gated_delta_rule(ctx, q, k, v, g, beta, batch, state, out, algo);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
