#include "ops/dflash.h"

#include <cstdint>

#include "ops/cpu/dflash_ops.h"
#include "ops/cuda/dflash_ops.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

void check_i32(const ExecContext& ctx, const char* op, const char* name, const TensorView& t,
               std::initializer_list<int64_t> dims) {
    check_device(ctx, op, name, t);
    check_dtype(op, name, t, DType::I32);
    check_shape(op, name, t, dims);
    check_contiguous(op, name, t);
}

// A float tensor of dtype `dtype` and the given shape, contiguous.
void check_dense(const ExecContext& ctx, const char* op, const char* name, const TensorView& t,
                 DType dtype, std::initializer_list<int64_t> dims) {
    check_device(ctx, op, name, t);
    check_dtype(op, name, t, dtype);
    check_shape(op, name, t, dims);
    check_contiguous(op, name, t);
}

// The bytes a 2-D row view [rows, cols] touches.
struct ByteRange {
    uintptr_t begin = 0, end = 0;
};
ByteRange bytes_of(const TensorView& t) {
    if (t.numel() == 0) return {};
    const int64_t elem = dtype_size(t.dtype);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data);
    return {begin, begin + uintptr_t(((t.size(0) - 1) * t.stride[0] + t.size(1)) * elem)};
}
bool overlap(const TensorView& a, const TensorView& b) {
    const ByteRange x = bytes_of(a), y = bytes_of(b);
    return x.begin < x.end && y.begin < y.end && x.begin < y.end && y.begin < x.end;
}

void check_segments(const ExecContext& ctx, const char* op, const int32_t* host,
                    const TensorView& segments, int64_t T) {
    check_i32(ctx, op, "segments", segments, {-1});
    require(host != nullptr, op, ": host_segments is null");
    const int64_t S = segments.size(0) - 1;
    require(S >= 0 && host[0] == 0 && host[S] == T, op, ": segments must run from 0 to T = ", T);
    for (int64_t s = 0; s < S; ++s)
        require(host[s] <= host[s + 1], op, ": segment ", s, " ends before it starts");
}

// Token ids index the codebooks' rows: on the CPU (host memory) each is checked here.
void check_ids(const char* op, const char* name, const TensorView& ids, int64_t V) {
    const int32_t* p = ids.ptr<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i)
        require(p[i] >= 0 && p[i] < V, op, ": ", name, "[", i, "] = ", p[i],
                " is not a row of the [", V, ", R] codebooks");
}

} // namespace

void grouped_dynamic_conv(const ExecContext& ctx, const TensorView& x, const TensorView& dynamic,
                          const TensorView& base, int64_t group_size, const int32_t* host_segments,
                          const TensorView& segments, const TensorView& out) {
    constexpr const char* op = "grouped_dynamic_conv";
    check_device(ctx, op, "x", x);
    check_float(op, "x", x);
    check_shape(op, "x", x, {-1, -1});
    check_rows_contiguous(op, "x", x);
    const int64_t T = x.size(0), H = x.size(1);
    check_dense(ctx, op, "out", out, x.dtype, {T, H});
    require(!overlap(out, x), op, ": out must not alias x");
    check_dense(ctx, op, "base", base, x.dtype, {-1, H});
    const int64_t taps = base.size(0);
    require(taps >= 1, op, ": base needs at least one tap, got ", base.describe());
    require(group_size >= 1 && H % group_size == 0, op, ": group_size ", group_size,
            " does not divide the ", H, " channels");
    const int64_t G = H / group_size;
    check_device(ctx, op, "dynamic", dynamic);
    check_dtype(op, "dynamic", dynamic, x.dtype);
    check_shape(op, "dynamic", dynamic, {T, taps * G});
    check_rows_contiguous(op, "dynamic", dynamic);
    check_segments(ctx, op, host_segments, segments, T);
    if (T == 0 || H == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&x, &dynamic, &base, &out});
        return cpu::grouped_dynamic_conv(ctx.cpu_mode, x, dynamic, base, group_size, host_segments,
                                         segments.size(0) - 1, out);
    case DeviceType::Cuda:
        check_cuda_float(op, {&x, &dynamic, &base, &out});
        return cuda::grouped_dynamic_conv(ctx, x, dynamic, base, group_size, host_segments,
                                          segments, out);
    }
    no_backend(op, ctx);
}

void dflash_select(const ExecContext& ctx, const TensorView& unary, const TensorView& cand,
                   const TensorView& g, const TensorView& P, const TensorView& S,
                   const TensorView& anchor, const TensorView& u, float temperature,
                   const TensorView& path, const TensorView& q) {
    constexpr const char* op = "dflash_select";
    check_dense(ctx, op, "unary", unary, DType::F32, {-1, -1, -1});
    const int64_t B = unary.size(0), K = unary.size(1), k = unary.size(2);
    require(k >= 1 && k <= 64, op, ": k = ", k, " candidates per position, expected 1 to 64");
    check_i32(ctx, op, "cand", cand, {B, K, k});
    check_float(op, "g", g);
    check_dense(ctx, op, "g", g, g.dtype, {B, K, -1});
    const int64_t R = g.size(2);
    check_dense(ctx, op, "P", P, g.dtype, {-1, R});
    const int64_t V = P.size(0);
    require(V >= 1, op, ": the codebooks have no rows");
    check_dense(ctx, op, "S", S, g.dtype, {V, R});
    check_i32(ctx, op, "anchor", anchor, {B});
    const bool sampling = temperature > 0.0f; // a NaN temperature is greedy too
    if (sampling) check_dense(ctx, op, "u", u, DType::F32, {B, K});
    check_i32(ctx, op, "path", path, {B, K});
    check_dense(ctx, op, "q", q, DType::F32, {B, K, k});
    if (B == 0 || K == 0) return;
    switch (ctx.device.type) {
    case DeviceType::Cpu:
        check_cpu_f32(op, {&g, &P, &S});
        check_ids(op, "anchor", anchor, V);
        check_ids(op, "cand", cand, V);
        return cpu::dflash_select(ctx.cpu_mode, unary, cand, g, P, S, anchor,
                                  sampling ? u : TensorView{}, temperature, path, q);
    case DeviceType::Cuda:
        check_cuda_float(op, {&g, &P, &S});
        return cuda::dflash_select(ctx, unary, cand, g, P, S, anchor, sampling ? u : TensorView{},
                                   temperature, path, q);
    }
    no_backend(op, ctx);
}

} // namespace ninfer::ops
