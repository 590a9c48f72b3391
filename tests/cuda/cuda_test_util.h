// Helpers for the CUDA tests (label cuda): moving tensors between the host and the device,
// device SeqBatches, and the bf16 tolerance presets. Each CUDA route is compared with the CPU
// reference (FP64 accumulation) run on the same (rounded) inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ninfer/engine.h"
#include "ops/exec_context.h"
#include "ops/memory.h"
#include "ops/op_test_util.h"
#include "ops/route_table.h"
#include "ops/seq_batch.h"

namespace ninfer::test {

// Engine options for a CUDA test. ctest runs several tests at once on one GPU, so an engine takes
// small fixed pools out of the memory that is free, not a share of the whole device.
inline EngineOptions cuda_engine_options(const std::string& dtype = "auto") {
    EngineOptions o;
    o.device = "cuda";
    o.dtype = dtype;
    o.gpu_memory_utilization = 1.0;
    o.max_context = 4096;
    o.max_sequences = 16;
    o.kv_cache_tokens = 16384;
    o.prefix_cache_snapshots = 16;
    // The built-in route table, not a table `ninfer tune` left in this machine's cache: the
    // tests assert the built-in boundaries, and the table in force is process-wide.
    o.route_table = "builtin";
    return o;
}

// While it lives, the table in force gives route decision `id`'s every value to `kernel` (the
// table in force before is restored after): a test forces one CUDA route this way.
class ForcedRoute {
public:
    ForcedRoute(ops::RouteId id, int kernel) : before_(ops::active_route_table()) {
        ops::set_active_route_table(before_.with_bands(id, {{ops::kRouteUnbounded, kernel}}));
    }
    ~ForcedRoute() { ops::set_active_route_table(before_); }
    ForcedRoute(const ForcedRoute&) = delete;
    ForcedRoute& operator=(const ForcedRoute&) = delete;

private:
    ops::RouteTable before_;
};

inline const ops::ExecContext kCpuRef = ops::ExecContext::cpu(ops::CpuMode::Reference);

// bf16 inputs are rounded before both paths run, so these cover bf16 outputs and activations
// rounded inside the kernel (about 3 significant digits), not input rounding.
inline constexpr Tolerance kBf16Elementwise{"bf16_elementwise", 8e-3, 2e-2};
inline constexpr Tolerance kBf16Reduction{"bf16_reduction", 1e-2, 4e-2};
// f32 on CUDA against FP64: ordering and fast-math intrinsics (__expf) differ.
inline constexpr Tolerance kCudaF32{"cuda_f32", 2e-5, 2e-4};

inline ops::ExecContext cuda_ctx(DType dtype) {
    ops::ExecContext ctx = ops::ExecContext::cuda(0, dtype);
    ops::bind_device(ctx);
    return ctx;
}

// Host F32 tensor rounded through dtype (so the CPU reference sees the device's exact inputs).
inline Tensor rounded(const TensorView& host, DType dtype) {
    Tensor t = clone(host);
    if (dtype == DType::BF16)
        for (int64_t i = 0; i < t.numel(); ++i)
            t.ptr<float>()[i] = bf16_to_float(float_to_bf16(t.ptr<float>()[i]));
    return t;
}

// Op tests run once per device dtype (F32 and BF16): the context, the presets for that dtype,
// and random host inputs already rounded to it.
class CudaDtypeTest : public ::testing::TestWithParam<DType> {
protected:
    DType dt() const { return GetParam(); }
    ops::ExecContext ctx() const { return cuda_ctx(dt()); }
    const Tolerance& elementwise() const {
        return dt() == DType::F32 ? kCudaF32 : kBf16Elementwise;
    }
    const Tolerance& reduction() const { return dt() == DType::F32 ? kCudaF32 : kBf16Reduction; }
    Tensor input(std::initializer_list<int64_t> dims, uint64_t seed, float scale = 1.0f) const {
        return rounded(random_tensor(dims, seed, scale), dt());
    }
};

// A device copy of a contiguous host tensor, converted to dtype (integers keep their dtype).
inline Tensor to_device(const ops::ExecContext& ctx, const TensorView& host, DType dtype) {
    const DType d = is_float(host.dtype) ? dtype : host.dtype;
    Tensor t = Tensor::empty(ops::device_allocator(ctx.device), d, host.shape.data(), host.ndim);
    ops::upload(ctx, host, t);
    return t;
}

// A host F32 (or integer) copy of a contiguous device tensor.
inline Tensor to_host(const ops::ExecContext& ctx, const TensorView& dev) {
    const DType d = is_float(dev.dtype) ? DType::F32 : dev.dtype;
    Tensor t = Tensor::empty(cpu_allocator(), d, dev.shape.data(), dev.ndim);
    ops::synchronize(ctx);
    ops::download(ctx, dev, t);
    return t;
}

// Fills `bytes` of ctx's memory pool with NaN and hands them back to it, so allocations that
// follow find stale data as a serving step does where earlier steps left theirs (the pool keeps
// freed memory and hands it out again).
inline void leave_nan_in_pool(const ops::ExecContext& ctx, int64_t bytes) {
    Tensor stale = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {bytes / 4});
    ops::fill_random(ctx, stale, 0, std::nanf(""), 0.0f);
    ops::synchronize(ctx);
}

// gtest assertion: every element of a host tensor is finite (the first bad one's row and column
// over `cols` columns otherwise).
inline ::testing::AssertionResult all_finite(const TensorView& host, int64_t cols) {
    const std::vector<double> v = to_doubles(host);
    for (size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
            return ::testing::AssertionFailure() << "non-finite " << v[i] << " at row "
                                                 << int64_t(i) / cols << ", column "
                                                 << int64_t(i) % cols;
    return ::testing::AssertionSuccess();
}

// `body` writes `out` (which starts each run as `initial`, a host tensor): run eagerly twice, then
// captured as a CUDA graph and replayed twice, every run must equal the first bit for bit (the
// routes behind decode graphs must be deterministic and capturable). ctx needs a stream of its
// own (create_stream): the legacy default stream cannot be captured.
inline void expect_replays_equal_eager(const ops::ExecContext& ctx, const TensorView& initial,
                                       const TensorView& out, const std::function<void()>& body,
                                       const std::string& what) {
    body();
    const Tensor eager = to_host(ctx, out);
    ops::upload(ctx, initial, out);
    body(); // atomics may order work differently per call; the result must not change
    EXPECT_TRUE(near(to_host(ctx, out), eager, kExact)) << "eager twice, " << what;
    auto graph = ops::capture_graph(ctx, body);
    for (int replay = 0; replay < 2; ++replay) {
        ops::upload(ctx, initial, out);
        graph->launch(ctx);
        EXPECT_TRUE(near(to_host(ctx, out), eager, kExact)) << "replay " << replay << ", " << what;
    }
}

// A ragged batch whose arrays exist on the host (HostBatch, for the CPU reference) and on the
// device (for CUDA), with the same values.
class DualBatch {
public:
    DualBatch(const ops::ExecContext& ctx, const std::vector<SeqSpec>& seqs,
              int32_t block_size = 16)
        : host_(seqs, block_size) {
        const ops::SeqBatch& h = host_;
        device_ = h;
        d_row_begin_ = to_device(ctx, h.row_begin, DType::I32);
        d_pos_begin_ = to_device(ctx, h.pos_begin, DType::I32);
        d_slot_ = to_device(ctx, h.state_slot, DType::I32);
        d_table_ = to_device(ctx, h.block_table, DType::I32);
        device_.row_begin = d_row_begin_;
        device_.pos_begin = d_pos_begin_;
        device_.state_slot = d_slot_;
        device_.block_table = d_table_;
    }
    DualBatch(const DualBatch&) = delete;
    DualBatch& operator=(const DualBatch&) = delete;

    const ops::SeqBatch& host() const { return host_; }
    const ops::SeqBatch& device() const { return device_; }

private:
    HostBatch host_;
    ops::SeqBatch device_;
    Tensor d_row_begin_, d_pos_begin_, d_slot_, d_table_;
};

// Quantized weights resident on CUDA (fp8, groupwise) against the CPU on the same dequantized
// weights: fp8 codes and groupwise codes times their scales are those weights exactly, so bf16
// activations (and bf16 dequantized scratch on the many-row routes) separate the resident run
// from the CPU's. The same model with its weights dequantized to bf16 at load measures what bf16
// rounding alone moves these tiny random models' logits (near-tied routers flip experts): the
// resident run may deviate by at most kResidentVsBf16Factor times that, and never needs to beat
// kBf16LogitsFloor. Deviation: max |got - want| / max |want| (max_rel_diff).
inline constexpr double kBf16LogitsFloor = 3e-2;
inline constexpr double kResidentVsBf16Factor = 2.0;
// The prompt in one chunk (the many-row routes), then four one-token steps (the decode routes).
inline const std::vector<int64_t> kResidentSchedule = {20, 1, 1, 1, 1};

inline double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
        ref = std::max(ref, std::fabs(double(want[i])));
    }
    return diff / ref;
}

} // namespace ninfer::test
