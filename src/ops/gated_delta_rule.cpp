#include "ops/gated_delta_rule.h"

#include "ops/conv1d.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/gated_rms_norm.h"
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
    check_gdn_state_dtype(op, "state", state);
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

namespace {

constexpr const char* kGdnCore = "gdn_core";

// gdn_core as the composition that defines it (the CPU body and CUDA's route for prefill and
// other shapes). Arguments are validated by gdn_core; each op validates its own again.
void gdn_core_composed(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
                       const TensorView& b, const TensorView& a, const TensorView& conv_w,
                       const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
                       float eps, const SeqBatch& batch, const TensorView& conv_state,
                       const TensorView& recurrent_state, const TensorView& conv_out,
                       const TensorView& g, const TensorView& beta, const TensorView& core,
                       int64_t Hk) {
    const int64_t Hv = recurrent_state.size(1), dk = recurrent_state.size(2);
    const int64_t dv = recurrent_state.size(3);
    causal_conv1d_silu(ctx, qkv, conv_w, batch, conv_state, conv_out);
    gdn_gates(ctx, a, b, A_log, dt_bias, g, beta);
    // conv_out columns: q [0, Hk dk), k [Hk dk, 2 Hk dk), v [2 Hk dk, 2 Hk dk + Hv dv).
    gated_delta_rule(ctx, conv_out.split_heads(0, Hk, dk), conv_out.split_heads(Hk * dk, Hk, dk),
                     conv_out.split_heads(2 * Hk * dk, Hv, dv), g, beta, batch, recurrent_state,
                     core);
    gated_rms_norm(ctx, core, z.split_heads(0, Hv, dv), norm_w, eps, core);
}

// Checks gdn_core's arguments against its contract; returns Hk.
int64_t check_gdn_core(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
                       const TensorView& b, const TensorView& a, const TensorView& conv_w,
                       const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
                       const SeqBatch& batch, const TensorView& conv_state,
                       const TensorView& recurrent_state, const TensorView& conv_out,
                       const TensorView& g, const TensorView& beta, const TensorView& core) {
    for (auto [name, t] : {std::pair{"qkv", &qkv},
                           {"z", &z},
                           {"b", &b},
                           {"a", &a},
                           {"conv_w", &conv_w},
                           {"A_log", &A_log},
                           {"dt_bias", &dt_bias},
                           {"norm_w", &norm_w},
                           {"conv_state", &conv_state},
                           {"recurrent_state", &recurrent_state},
                           {"conv_out", &conv_out},
                           {"g", &g},
                           {"beta", &beta},
                           {"core", &core}}) {
        check_device(ctx, kGdnCore, name, *t);
        check_float(kGdnCore, name, *t);
        check_rows_contiguous(kGdnCore, name, *t);
    }
    check_shape(kGdnCore, "qkv", qkv, {-1, -1});
    const int64_t T = qkv.size(0), C = qkv.size(1);
    check_shape(kGdnCore, "recurrent_state", recurrent_state, {-1, -1, -1, -1});
    const int64_t Hv = recurrent_state.size(1), dk = recurrent_state.size(2);
    const int64_t dv = recurrent_state.size(3);
    require(Hv > 0 && dk > 0 && C > Hv * dv && (C - Hv * dv) % (2 * dk) == 0, kGdnCore,
            ": qkv width ", C, " is not 2 Hk dk + Hv dv for Hv ", Hv, ", dk ", dk, ", dv ", dv);
    const int64_t Hk = (C - Hv * dv) / (2 * dk);
    require(Hv % Hk == 0, kGdnCore, ": value heads ", Hv, " not a multiple of key heads ", Hk);
    check_shape(kGdnCore, "z", z, {T, Hv * dv});
    check_shape(kGdnCore, "b", b, {T, Hv});
    check_shape(kGdnCore, "a", a, {T, Hv});
    check_shape(kGdnCore, "conv_w", conv_w, {C, -1});
    check_shape(kGdnCore, "A_log", A_log, {Hv});
    check_shape(kGdnCore, "dt_bias", dt_bias, {Hv});
    check_shape(kGdnCore, "norm_w", norm_w, {dv});
    check_shape(kGdnCore, "conv_state", conv_state,
                {recurrent_state.size(0), C, conv_w.size(1) - 1});
    check_gdn_state_dtype(kGdnCore, "recurrent_state", recurrent_state);
    check_contiguous(kGdnCore, "conv_state", conv_state);
    check_contiguous(kGdnCore, "recurrent_state", recurrent_state);
    check_shape(kGdnCore, "conv_out", conv_out, {T, C});
    require(conv_out.data != qkv.data, kGdnCore, ": conv_out must not alias qkv");
    check_shape(kGdnCore, "g", g, {T, Hv});
    check_shape(kGdnCore, "beta", beta, {T, Hv});
    check_dtype(kGdnCore, "g", g, DType::F32);
    check_dtype(kGdnCore, "beta", beta, DType::F32);
    check_shape(kGdnCore, "core", core, {T, Hv, dv});
    check_contiguous(kGdnCore, "core", core);
    check_seq_batch(kGdnCore, batch, T, recurrent_state.size(0), -1);
    return Hk;
}

} // namespace

void gdn_core(const ExecContext& ctx, const TensorView& qkv, const TensorView& z,
              const TensorView& b, const TensorView& a, const TensorView& conv_w,
              const TensorView& A_log, const TensorView& dt_bias, const TensorView& norm_w,
              float eps, const SeqBatch& batch, const TensorView& conv_state,
              const TensorView& recurrent_state, const TensorView& conv_out, const TensorView& g,
              const TensorView& beta, const TensorView& core) {
    constexpr const char* op = kGdnCore;
    const int64_t Hk = check_gdn_core(ctx, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, batch,
                                      conv_state, recurrent_state, conv_out, g, beta, core);
    if (qkv.size(0) == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&qkv, &z, &b, &a, &conv_w, &A_log, &dt_bias, &norm_w, &conv_state,
                           &conv_out, &core});
        return gdn_core_composed(ctx, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, batch,
                                 conv_state, recurrent_state, conv_out, g, beta, core, Hk);
    case DeviceType::Cuda:
        check_cuda_float(op, {&qkv, &z, &b, &a, &conv_w, &A_log, &dt_bias, &norm_w, &conv_state,
                              &conv_out, &core});
        if (cuda::gdn_core_fused_fits(batch, conv_w, recurrent_state, Hk))
            return cuda::gdn_core_fused(ctx, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, eps,
                                        batch, conv_state, recurrent_state, core);
        return gdn_core_composed(ctx, qkv, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, batch,
                                 conv_state, recurrent_state, conv_out, g, beta, core, Hk);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
