// The harness of `ninfer tune` (route_tuner.h), shared by its files: a stream and an L2-flush
// buffer on the device being tuned, tensor makers, the cold-L2 timing and the forced-kernel
// measurement of one decision at one value. Internal to src/runtime/route_tuner*.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/kv_cache.h"
#include "ops/linear.h"
#include "ops/memory.h"
#include "ops/route_table.h"
#include "ops/weight.h"
#include "runtime/route_tuner.h"

namespace ninfer::runtime::tuning {

using ops::RouteId;
using ops::RouteMeasurement;
using Measurements = std::vector<std::vector<RouteMeasurement>>;

// Bytes written between timed calls to evict the L2 (H100 50 MB, H200 60 MB, B200 126 MB).
inline constexpr int64_t kFlushBytes = int64_t(256) << 20;

struct Bench {
    ops::ExecContext ctx;
    std::shared_ptr<void> stream;
    Tensor flush;
    const TuneOptions& o;
    DType act = DType::BF16; // activations and dense weights: BF16 on CUDA, F32 on the CPU

    explicit Bench(const TuneOptions& options) : o(options) {
        require(!o.device.is_cpu() || o.shrink > 1,
                "ninfer tune: the route tables are CUDA's; pass --device cuda");
        require(o.reps >= 1 && o.inner >= 1 && o.shrink >= 1 && o.shrink <= 16,
                "ninfer tune: reps and inner must be >= 1, shrink in [1, 16]");
        if (o.device.is_cpu()) {
            ctx = ops::ExecContext::cpu();
            act = DType::F32;
        } else {
            ctx = ops::ExecContext::cuda(o.device.index, DType::BF16);
        }
        stream = ops::create_stream(ctx.device);
        ctx.stream = stream.get();
        ops::bind_device(ctx);
        flush = empty(DType::F32, {kFlushBytes / 4 / o.shrink});
    }
    // A dimension of the real shapes, shrunk (TuneOptions::shrink).
    int64_t dim(int64_t d) const { return std::max<int64_t>(d / o.shrink, 1); }
    // The calling thread goes back to the default stream (as the engine's constructor does),
    // once this stream's work is done: its allocations must not stay ordered on a stream that is
    // about to be destroyed.
    ~Bench() {
        ops::synchronize(ctx);
        ops::ExecContext unbound = ctx;
        unbound.stream = nullptr;
        ops::bind_device(unbound);
    }

    using Dims = std::vector<int64_t>;
    Tensor empty(DType dt, const Dims& dims) {
        return Tensor::empty(ops::device_allocator(ctx.device), dt, dims.data(), int(dims.size()));
    }
    Tensor random(DType dt, const Dims& dims, uint64_t seed, float mean, float stddev) {
        Tensor t = empty(dt, dims);
        ops::fill_random(ctx, t, seed, mean, stddev);
        return t;
    }
    // Host bytes copied into a new device tensor of `dims`.
    Tensor from_host(DType dt, const Dims& dims, void* host) {
        Tensor t = empty(dt, dims);
        ops::upload(ctx,
                    TensorView::contiguous(host, dt, Device::cpu(), dims.data(), int(dims.size())),
                    t);
        return t;
    }
    // Pseudo-random bytes (codes), each passing `valid` (xorshift64).
    Tensor random_bytes(DType dt, const Dims& dims, uint64_t seed, bool (*valid)(uint8_t)) {
        int64_t n = dtype_size(dt);
        for (int64_t d : dims) n *= d;
        std::vector<uint8_t> host(static_cast<size_t>(n));
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
        for (uint8_t& b : host) {
            do {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                b = uint8_t(x >> 24);
            } while (!valid(b));
        }
        return from_host(dt, dims, host.data());
    }
    // F16 scales within +-25% of `value`.
    Tensor f16_scales(const Dims& dims, float value, uint64_t seed) {
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        std::vector<uint16_t> host(static_cast<size_t>(n));
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
        for (uint16_t& h : host) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            h = float_to_f16(value * (0.75f + 0.5f * float(x % 1000) / 1000.0f));
        }
        return from_host(DType::F16, dims, host.data());
    }

    // Microseconds one call of body takes with a cold L2 (route_tuner.h).
    double cold_us(const std::function<void()>& body) {
        body(); // warm-up: allocations, cuBLAS handles and plans
        ops::synchronize(ctx);
        auto timed = [&](bool with_body) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < o.inner; ++i) {
                ops::fill_zero(ctx, flush);
                if (with_body) body();
            }
            ops::synchronize(ctx);
            return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                             t0)
                       .count() /
                   o.inner;
        };
        std::vector<double> us;
        for (int r = 0; r < o.reps; ++r) us.push_back(timed(true) - timed(false));
        std::sort(us.begin(), us.end());
        return std::max(us[us.size() / 2], 0.01); // a positive time: from_measurements' rule
    }

    // Times decision id's kernels at `value` (those whose domain holds it and that can run here:
    // route_kernel_available), each forced by a table that gives it `value`; appends the
    // measurements.
    void measure(RouteId id, int64_t value, const std::function<void()>& body,
                 std::vector<RouteMeasurement>& out) {
        const ops::RouteDecisionInfo& info = ops::route_info(id);
        const ops::RouteTable base = ops::RouteTable::builtin();
        for (int k = 0; k < int(info.kernels.size()); ++k) {
            if (value > info.kernels[size_t(k)].max || !ops::route_kernel_available(id, k))
                continue;
            ops::set_active_route_table(base.forcing(id, k, value));
            out.push_back({value, k, cold_us(body)});
        }
    }

    // Decision id's kernels on y = x w, x [T, K] random rows, at every value T of its grid;
    // appends the measurements to ms and reports them.
    void measure_linear(RouteId id, const ops::WeightView& w, int64_t N, int64_t K, uint64_t seed,
                        std::vector<RouteMeasurement>& ms) {
        for (int64_t T : tune_values(id, o.quick)) {
            const Tensor x = random(act, {T, K}, seed, 0.0f, 1.0f);
            const Tensor y = empty(act, {T, N});
            measure(id, T, [&] { ops::linear(ctx, x, w, y); }, ms);
        }
        report(id, ms);
    }

    void report(RouteId id, const std::vector<RouteMeasurement>& ms) {
        if (!o.progress) return;
        const ops::RouteDecisionInfo& info = ops::route_info(id);
        std::string line = info.name + ":";
        for (const RouteMeasurement& m : ms)
            line += concat(" ", m.at, "/", info.kernels[size_t(m.kernel)].name, "=",
                           int64_t(m.us * 10) / 10.0, "us");
        o.progress(line);
    }
};

inline int64_t blocks128(int64_t n) {
    return (n + 127) / 128; // fp8 scale blocks of 128
}

inline bool any_byte(uint8_t) {
    return true;
}
inline bool not_fp8_nan(uint8_t v) {
    return (v & 0x7F) != 0x7F; // e4m3fn's NaN codes
}

// The decisions measured outside route_tuner.cpp (route_tuner_moe.cpp): moe_block.* (id), and
// moe_experts.bf16 / .fp8 and attention_prefill.bf16.
void tune_moe_block(Bench& b, RouteId id, Measurements& out);
void tune_moe_experts(Bench& b, Measurements& out);
void tune_moe_experts_fp8(Bench& b, Measurements& out);
// attention_prefill.bf16 over bf16 planes (kv Activation), attention_prefill.coded over int8.
void tune_attention_prefill(Bench& b, ops::KvDtype kv, Measurements& out);

} // namespace ninfer::runtime::tuning
