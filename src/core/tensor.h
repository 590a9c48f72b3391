// Tensor views (non-owning, strided, up to 4 dims) and owning tensors over a device allocation.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace ninfer {

enum class DeviceType : uint8_t { Cpu, Cuda };

struct Device {
    DeviceType type = DeviceType::Cpu;
    int index = 0;
    static Device cpu() { return {DeviceType::Cpu, 0}; }
    static Device cuda(int i) { return {DeviceType::Cuda, i}; }
    bool is_cpu() const { return type == DeviceType::Cpu; }
    bool operator==(const Device&) const = default;
};
std::string device_name(Device device);

constexpr int kMaxDims = 4;
using Shape = std::array<int64_t, kMaxDims>;

// A view of memory as a strided tensor. Strides are in elements. Dims beyond ndim are 1.
struct TensorView {
    void* data = nullptr;
    DType dtype = DType::F32;
    Device device{};
    int ndim = 0;
    Shape shape{1, 1, 1, 1};
    Shape stride{0, 0, 0, 0};

    // A contiguous (row-major) view.
    static TensorView contiguous(void* data, DType dtype, Device device,
                                 std::initializer_list<int64_t> dims);
    static TensorView contiguous(void* data, DType dtype, Device device, const int64_t* dims,
                                 int ndim);

    bool empty() const { return data == nullptr; }
    int64_t size(int dim) const { return shape[dim]; }
    int64_t numel() const;
    int64_t nbytes() const { return numel() * dtype_size(dtype); }
    bool is_contiguous() const;
    // True when the last dim is contiguous (stride 1); rows may be padded.
    bool rows_contiguous() const { return ndim == 0 || stride[ndim - 1] == 1; }

    template <typename T> T* ptr() const { return static_cast<T*>(data); }
    // Element offset (in elements) of index (i0, i1, i2, i3).
    int64_t offset(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
    }
    template <typename T> T* at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return static_cast<T*>(data) + offset(i0, i1, i2, i3);
    }

    // Sub-range [begin, begin+count) of dimension dim (no copy).
    TensorView narrow(int dim, int64_t begin, int64_t count) const;
    // New shape over the same contiguous memory.
    TensorView reshape(std::initializer_list<int64_t> dims) const;
    // Columns of a 2-D [T, N] view as [T, heads, dim]: head h starts at column
    // col0 + h * head_stride (head_stride 0 means dim: packed heads), no copy.
    TensorView split_heads(int64_t col0, int64_t heads, int64_t dim, int64_t head_stride = 0) const;
    // Treat a view with contiguous rows as 2-D [rows, last dim] when the leading dims collapse.
    TensorView flatten_rows() const;
    std::string describe() const; // "BF16[4, 128] cpu"
};

// Owns device memory; the deleter knows the device.
using Buffer = std::shared_ptr<void>;

// Allocates device memory. CPU allocations are 64-byte aligned and zero-filled; CUDA ones are
// 256-byte aligned and uninitialised.
class Allocator {
public:
    virtual ~Allocator() = default;
    virtual Buffer allocate(int64_t bytes) = 0;
    virtual Device device() const = 0;
};
Allocator& cpu_allocator();

// An owning tensor: a contiguous view plus the buffer keeping it alive.
class Tensor {
public:
    Tensor() = default;
    Tensor(Buffer buffer, TensorView view) : buffer_(std::move(buffer)), view_(view) {}
    static Tensor empty(Allocator& allocator, DType dtype, std::initializer_list<int64_t> dims);
    static Tensor empty(Allocator& allocator, DType dtype, const int64_t* dims, int ndim);

    const TensorView& view() const { return view_; }
    operator const TensorView&() const { return view_; }
    bool defined() const { return view_.data != nullptr; }
    template <typename T> T* ptr() const { return view_.ptr<T>(); }
    int64_t size(int dim) const { return view_.size(dim); }
    int64_t numel() const { return view_.numel(); }
    const Buffer& buffer() const { return buffer_; }

private:
    Buffer buffer_;
    TensorView view_;
};

} // namespace ninfer
