#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "core/checked.h"
#include "core/error.h"

namespace ninfer {

std::string device_name(Device device) {
    return device.type == DeviceType::Cpu ? "cpu" : concat("cuda:", device.index);
}

TensorView TensorView::contiguous(void* data, DType dtype, Device device, const int64_t* dims,
                                  int ndim) {
    require(ndim >= 0 && ndim <= kMaxDims, "tensor rank ", ndim, " exceeds ", kMaxDims);
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    v.ndim = ndim;
    int64_t running = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        require(dims[d] >= 0, "negative tensor dimension");
        v.shape[d] = dims[d];
        v.stride[d] = running;
        running = checked_mul(running, dims[d] == 0 ? 1 : dims[d], "tensor shape");
    }
    return v;
}

TensorView TensorView::contiguous(void* data, DType dtype, Device device,
                                  std::initializer_list<int64_t> dims) {
    return contiguous(data, dtype, device, dims.begin(), int(dims.size()));
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
}

bool TensorView::is_contiguous() const {
    if (numel() == 0) return true; // nothing to lay out (strides of zero-sized dims are free)
    int64_t running = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        if (shape[d] != 1 && stride[d] != running) return false;
        running *= shape[d];
    }
    return true;
}

TensorView TensorView::split_heads(int64_t col0, int64_t heads, int64_t dim,
                                   int64_t head_stride) const {
    require(ndim == 2 && heads > 0 && dim > 0,
            "split_heads: needs a 2-D view, heads and dim > 0, got ", describe());
    const int64_t stride_h = head_stride == 0 ? dim : head_stride;
    TensorView out = narrow(1, col0, (heads - 1) * stride_h + dim); // checks the column range
    out.ndim = 3;
    out.shape = {shape[0], heads, dim, 1};
    out.stride = {stride[0], stride_h * stride[1], stride[1], 0};
    return out;
}

TensorView TensorView::narrow(int dim, int64_t begin, int64_t count) const {
    require(dim >= 0 && dim < ndim, "narrow: dim ", dim, " out of range for ", describe());
    require(begin >= 0 && count >= 0 && begin + count <= shape[dim], "narrow: [", begin, ", ",
            begin + count, ") out of range for dim ", dim, " of ", describe());
    TensorView v = *this;
    v.data = static_cast<char*>(data) + begin * stride[dim] * dtype_size(dtype);
    v.shape[dim] = count;
    return v;
}

TensorView TensorView::reshape(std::initializer_list<int64_t> dims) const {
    require(is_contiguous(), "reshape: view is not contiguous: ", describe());
    TensorView v = contiguous(data, dtype, device, dims);
    require(v.numel() == numel(), "reshape: ", describe(), " cannot become ", v.describe());
    return v;
}

TensorView TensorView::flatten_rows() const {
    require(ndim >= 1 && rows_contiguous(), "flatten_rows: last dim not contiguous: ", describe());
    if (ndim <= 2) return *this;
    // Leading dims must collapse into one uniformly strided row index.
    for (int d = 0; d + 2 < ndim; ++d)
        require(stride[d] == stride[d + 1] * shape[d + 1], "flatten_rows: ", describe(),
                " has non-uniform row strides");
    TensorView v = *this;
    int64_t rows = 1;
    for (int d = 0; d + 1 < ndim; ++d) rows *= shape[d];
    v.ndim = 2;
    v.shape = {rows, shape[ndim - 1], 1, 1};
    v.stride = {stride[ndim - 2], 1, 0, 0};
    return v;
}

std::string TensorView::describe() const {
    std::ostringstream out;
    out << dtype_name(dtype) << "[";
    for (int d = 0; d < ndim; ++d) out << (d ? ", " : "") << shape[d];
    out << "] " << device_name(device);
    return out.str();
}

namespace {

class CpuAllocator final : public Allocator {
public:
    Buffer allocate(int64_t bytes) override {
        // 64-byte alignment suits AVX-512 loads and cache lines.
        size_t rounded = size_t((bytes + 63) / 64 * 64);
        if (rounded == 0) rounded = 64;
        void* p = std::aligned_alloc(64, rounded);
        if (!p) fail(ErrorCategory::OutOfMemory, "cpu allocation of ", bytes, " bytes failed");
        std::memset(p, 0, rounded);
        return Buffer(p, [](void* q) { std::free(q); });
    }
    Device device() const override { return Device::cpu(); }
};

} // namespace

Allocator& cpu_allocator() {
    static CpuAllocator allocator;
    return allocator;
}

Tensor Tensor::empty(Allocator& allocator, DType dtype, const int64_t* dims, int ndim) {
    TensorView v = TensorView::contiguous(nullptr, dtype, allocator.device(), dims, ndim);
    Buffer buffer = allocator.allocate(checked_mul(v.numel(), dtype_size(dtype), "tensor bytes"));
    v.data = buffer.get();
    return Tensor(std::move(buffer), v);
}

Tensor Tensor::empty(Allocator& allocator, DType dtype, std::initializer_list<int64_t> dims) {
    return empty(allocator, dtype, dims.begin(), int(dims.size()));
}

} // namespace ninfer
