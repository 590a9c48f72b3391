// The device Collective (ops/collective.h): ranks in one process on CUDA devices that reach each
// other's memory (one GPU shared by streams, or peers over NVLink/PCIe P2P). Each call:
//   1. every rank posts its part's address, records `ready` on its stream, meets the others
//      (host barrier: addresses only, no device wait);
//   2. all_reduce: each rank's stream waits for every `ready`, one kernel sums all parts into the
//      rank's own buffer (f32, rank order 0..N-1, rounded once: every rank the same bits), records
//      `done`; after a second barrier each rank waits for every `done` (nobody reads its x any
//      more) and copies the sum into x. gather: the root waits for every `ready`, copies each part
//      into its columns (pitched copies), records `done`, which the others wait for before their
//      part may be rewritten.
// Event records and waits are stream-ordered, so a forward that calls these is capturable: inside
// a capture the events become the graph's edges between the ranks' streams.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <set>

#include "core/error.h"
#include "ops/collective.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/memory.h"
#include "ops/rank_barrier.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

using cuda::check;
using cuda::stream_of;

// Ranks the kernel takes by value (its parameter block holds their addresses).
constexpr int kMaxRanks = 8;

template <typename T> struct Parts {
    const T* p[kMaxRanks];
    int n;
};

__device__ inline float to_f32(float v) { return v; }
__device__ inline float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T from_f32(float v);
template <> __device__ inline float from_f32<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
    return __float2bfloat16(v);
}

// out[i] = sum over r of parts.p[r][i] (rank order, f32), grid-stride.
template <typename T>
__global__ void sum_parts_kernel(Parts<T> parts, T* out, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        float s = to_f32(parts.p[0][i]);
        for (int r = 1; r < parts.n; ++r) s += to_f32(parts.p[r][i]);
        out[i] = from_f32<T>(s);
    }
}

// What the ranks share: the barrier, each rank's posted address and width, and its events.
struct DeviceGroup : RankBarrier {
    explicit DeviceGroup(const std::vector<ExecContext>& ranks)
        : RankBarrier(int(ranks.size())), addr(ranks.size()), width(ranks.size()),
          ready(ranks.size()), done(ranks.size()) {
        int previous = 0;
        check(cudaGetDevice(&previous), "cudaGetDevice");
        for (size_t r = 0; r < ranks.size(); ++r) {
            check(cudaSetDevice(ranks[r].device.index), "cudaSetDevice");
            check(cudaEventCreateWithFlags(&ready[r], cudaEventDisableTiming), "cudaEventCreate");
            check(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming), "cudaEventCreate");
        }
        check(cudaSetDevice(previous), "cudaSetDevice");
    }
    ~DeviceGroup() {
        for (size_t r = 0; r < ready.size(); ++r) {
            cudaEventDestroy(ready[r]);
            cudaEventDestroy(done[r]);
        }
    }
    std::vector<const void*> addr;
    std::vector<int64_t> width;
    std::vector<cudaEvent_t> ready, done;
};

class DeviceCollective final : public GroupCollective<DeviceGroup> {
public:
    using GroupCollective::GroupCollective;
    std::string backend() const override { return "device"; }
    bool capturable() const override { return true; }

protected:
    void reduce(const ExecContext& ctx, const TensorView& x) override {
        DeviceGroup& g = *group_;
        const int64_t n = x.numel();
        // The sum's buffer: the largest x so far (the engine's profile forward runs the largest
        // step before any capture, so a captured call never allocates).
        if (sum_bytes_ < x.nbytes()) {
            sum_bytes_ = x.nbytes();
            sum_ = device_allocator(ctx.device).allocate(sum_bytes_);
        }
        post(ctx, x.data, n);
        const cudaStream_t stream = stream_of(ctx);
        for (int r = 0; r < g.ranks(); ++r)
            if (r != rank_) check(cudaStreamWaitEvent(stream, g.ready[size_t(r)], 0), "wait ready");
        for (int r = 0; r < g.ranks(); ++r)
            require(g.width[size_t(r)] == n, "all_reduce_sum: rank ", r, " posted ",
                    g.width[size_t(r)], " values, rank ", rank_, " ", n);
        const int blocks = int(std::min<int64_t>((n + 255) / 256, 1024));
        if (n > 0) {
            if (x.dtype == DType::F32)
                launch<float>(g, sum_.get(), n, blocks, stream);
            else
                launch<__nv_bfloat16>(g, sum_.get(), n, blocks, stream);
        }
        check(cudaEventRecord(g.done[size_t(rank_)], stream), "record done");
        g.barrier(); // every rank has enqueued its reads of every part
        for (int r = 0; r < g.ranks(); ++r)
            if (r != rank_) check(cudaStreamWaitEvent(stream, g.done[size_t(r)], 0), "wait done");
        if (n > 0)
            check(cudaMemcpyAsync(x.data, sum_.get(), size_t(x.nbytes()), cudaMemcpyDeviceToDevice,
                                  stream),
                  "all_reduce_sum copy");
    }

    void gather(const ExecContext& ctx, const TensorView& part, const TensorView& full,
                int root) override {
        DeviceGroup& g = *group_;
        const int64_t R = part.size(0);
        post(ctx, part.data, part.size(1));
        const cudaStream_t stream = stream_of(ctx);
        if (rank_ == root) {
            int64_t total = 0;
            for (int r = 0; r < g.ranks(); ++r) total += g.width[size_t(r)];
            const int64_t W = full.size(1);
            require(total == W, "gather_columns: ", full.describe(), " does not hold the ranks' ",
                    total, " columns");
            int64_t col = 0;
            for (int r = 0; r < g.ranks(); ++r) {
                const int64_t w = g.width[size_t(r)];
                if (r != rank_)
                    check(cudaStreamWaitEvent(stream, g.ready[size_t(r)], 0), "wait ready");
                if (R > 0 && w > 0)
                    check(cudaMemcpy2DAsync(full.ptr<float>() + col, size_t(W) * 4,
                                            g.addr[size_t(r)], size_t(w) * 4, size_t(w) * 4,
                                            size_t(R), cudaMemcpyDefault, stream),
                          "gather_columns copy");
                col += w;
            }
            check(cudaEventRecord(g.done[size_t(rank_)], stream), "record done");
        }
        g.barrier(); // the root's copies are enqueued
        if (rank_ != root)
            check(cudaStreamWaitEvent(stream, g.done[size_t(root)], 0), "wait for the root");
    }

private:
    // Posts this rank's address and width, records `ready` on its stream, meets the others.
    void post(const ExecContext& ctx, const void* data, int64_t width) {
        DeviceGroup& g = *group_;
        g.addr[size_t(rank_)] = data;
        g.width[size_t(rank_)] = width;
        check(cudaEventRecord(g.ready[size_t(rank_)], stream_of(ctx)), "record ready");
        g.barrier();
    }

    template <typename T>
    void launch(const DeviceGroup& g, void* out, int64_t n, int blocks, cudaStream_t stream) {
        Parts<T> parts{};
        parts.n = g.ranks();
        for (int r = 0; r < g.ranks(); ++r) parts.p[r] = static_cast<const T*>(g.addr[size_t(r)]);
        sum_parts_kernel<T><<<blocks, 256, 0, stream>>>(parts, static_cast<T*>(out), n);
        cuda::check_launch("sum_parts_kernel");
    }

    Buffer sum_;
    int64_t sum_bytes_ = 0;
};

} // namespace

std::vector<std::shared_ptr<Collective>> make_device_collectives(
    const std::vector<ExecContext>& ranks) {
    require(!ranks.empty() && int(ranks.size()) <= kMaxRanks, "--collective device: 1 to ",
            kMaxRanks, " ranks, got ", ranks.size());
    for (const ExecContext& c : ranks)
        require(!c.device.is_cpu(), "--collective device: CUDA devices, not the CPU");
    for (const ExecContext& a : ranks)
        for (const ExecContext& b : ranks) {
            if (a.device == b.device) continue;
            int can = 0;
            check(cudaDeviceCanAccessPeer(&can, a.device.index, b.device.index),
                  "cudaDeviceCanAccessPeer");
            require(can, "--collective device: cuda:", a.device.index, " cannot read cuda:",
                    b.device.index, "'s memory (no peer access); use --collective nccl or host");
        }
    auto group = std::make_shared<DeviceGroup>(ranks);
    std::vector<std::shared_ptr<Collective>> out;
    for (int r = 0; r < int(ranks.size()); ++r)
        out.push_back(std::make_shared<DeviceCollective>(group, r));
    return out;
}

} // namespace ninfer::ops
