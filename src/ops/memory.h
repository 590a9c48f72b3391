// Device memory services for the layers above ops: allocation, host<->device copies with dtype
// conversion, and fills. The model and runtime never touch device pointers otherwise.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::ops {

// The allocator of a device (CPU: 64-byte aligned, zero-filled).
Allocator& device_allocator(Device device);

// dst (on ctx.device, contiguous) = src (host, contiguous, same element count), converting
// between float dtypes or copying integer dtypes of equal type.
void upload(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
// dst (host, contiguous) = src (on ctx.device, contiguous), with the same conversions.
void download(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
// Sets every element of a contiguous device tensor to zero.
void fill_zero(const ExecContext& ctx, const TensorView& dst);
// Copies between contiguous tensors of one dtype on the same device (slot snapshots).
void copy(const ExecContext& ctx, const TensorView& src, const TensorView& dst);
// Copies src (contiguous, on from's device) to dst (contiguous, same dtype and size, on to's
// device), ordered on from's stream: a peer copy between two CUDA devices, a device copy when
// both are one device, a host copy on the CPU. Work on `to` that reads dst must first
// stream_wait(to, from). Capturable.
void copy_across(const ExecContext& from, const TensorView& src, const ExecContext& to,
                 const TensorView& dst);
// Lets devices a and b read each other's memory directly (NVLink or PCIe peer access) when the
// hardware allows it, so copy_across between them is one direct copy; without it CUDA stages
// the copy through the host. Idempotent; nothing on the CPU or for one device.
void enable_peer_access(Device a, Device b);
// Work enqueued on waiter's stream after this call runs after the work enqueued on producer's
// stream before it (CUDA: an event recorded on one, waited on by the other, across devices too;
// in a graph capture, a dependency). The CPU runs every op to completion: nothing to order.
void stream_wait(const ExecContext& waiter, const ExecContext& producer);
// copy(src[i], dst[i]) for every i, as one batch (the copies must not overlap): on CUDA one
// kernel launch per 64 copies instead of a call per copy (a GDN state row is ~60 tensors; a
// call each cost ~0.5 ms a row on the H200, mostly per-call overhead). Capturable.
void copy_many(const ExecContext& ctx, const std::vector<TensorView>& src,
               const std::vector<TensorView>& dst);
// Makes ctx's device current on the calling thread (CUDA), and ctx's stream the one this thread's
// device allocations are ordered on; every thread that launches work on a device calls it first.
// No-op on the CPU.
void bind_device(const ExecContext& ctx);

// A stream of its own for an engine (CUDA; nullptr on the CPU), destroyed with the holder. Work on
// it can be captured into graphs (the legacy default stream cannot).
std::shared_ptr<void> create_stream(Device device);

// A captured sequence of device work, replayed with one launch (CUDA graphs). The captured body
// must not synchronise with the host; its kernel arguments and buffers are fixed at capture.
class Graph {
public:
    virtual ~Graph() = default;
    virtual void launch(const ExecContext& ctx) = 0;
};
std::unique_ptr<Graph> capture_graph(const ExecContext& ctx, const std::function<void()>& body);
// Waits until the device has finished the work queued on ctx (no-op on the CPU).
void synchronize(const ExecContext& ctx);
// Whether ctx's stream is being captured into a graph (false on the CPU).
bool capturing(const ExecContext& ctx);
// Free and total bytes of ctx's device, after its queued work and with the allocator's cached
// free blocks returned (CUDA); on the CPU, the physical memory available and installed.
struct DeviceMemory {
    int64_t free = 0, total = 0;
};
DeviceMemory device_memory(const ExecContext& ctx);
// The allocator's pool (CUDA; 0 on the CPU): bytes in use now, and the most in use since
// reset_memory_peak, after ctx's queued work. What a piece of work takes at its peak and gives
// back (a forward's scratch, which device_memory's `free` counts as free although the next such
// forward takes it again):
//   reset_memory_peak(ctx); { work(); } transient = memory_peak(ctx) - memory_in_use(ctx);
void reset_memory_peak(const ExecContext& ctx);
int64_t memory_peak(const ExecContext& ctx);
int64_t memory_in_use(const ExecContext& ctx);
// dst[i] = mean + stddev * philox_normal(seed, i) (core/philox.h), rounded to dst's dtype
// (F32, BF16, or F8E4M3 codes saturated at +-448): the same stream on every device (up to the
// last bits of logf/cosf), for random-weight models at true size.
void fill_random(const ExecContext& ctx, const TensorView& dst, uint64_t seed, float mean,
                 float stddev);

// Ceilings measured on the device for benchmark reports: the copy bandwidth (bytes read plus
// bytes written per second, over a device-to-device copy of `bytes`) and the dense GEMM rate
// (FLOP/s of an n x n x n product in ctx.dtype through ops::linear), medians of `reps` runs.
double measure_copy_bandwidth(const ExecContext& ctx, int64_t bytes, int reps);
double measure_gemm_flops(const ExecContext& ctx, int64_t n, int reps);

} // namespace ninfer::ops
