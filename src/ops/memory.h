// Device memory services for the layers above ops: allocation, host<->device copies with dtype
// conversion, and fills. The model and runtime never touch device pointers otherwise.
#pragma once

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
// Waits until the device has finished the work queued on ctx (no-op on the CPU).
void synchronize(const ExecContext& ctx);

} // namespace ninfer::ops
