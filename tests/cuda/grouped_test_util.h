// Groupwise W8/Q4 weights for the CUDA tests (test_cuda_linear_grouped.cpp,
// test_cuda_moe_grouped.cpp): a weight quantized on the host with the converter's recipe
// (model/groupwise.h), its dense F32 reference (code * scale, exact), and its copy on the device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/groupwise.h"
#include "ops/weight.h"

namespace ninfer::test {

// A host groupwise weight of logical shape [N, K] or [E, N, K], quantized from N(0, sigma)
// values.
struct HostGrouped {
    Tensor codes, scale;
    int bits = 0;
    int64_t group = 0, K = 0;

    HostGrouped(const std::vector<int64_t>& dims, int bits_, int64_t group_, DType scale_dtype,
                uint64_t seed, float sigma = 0.02f)
        : bits(bits_), group(group_), K(dims.back()) {
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
        const Tensor w = random_tensor({rows, K}, seed, sigma);
        const model::GroupwiseTensor g =
            model::quantize_groupwise(w.ptr<float>(), rows, K, bits, group, scale_dtype, "w");
        const auto cdims = model::groupwise_code_shape(dims, bits);
        const auto sdims = model::groupwise_scale_shape(dims, group);
        const int nd = int(dims.size());
        codes = Tensor::empty(cpu_allocator(), model::groupwise_code_dtype(bits), cdims.data(), nd);
        std::copy(g.codes.begin(), g.codes.end(), codes.ptr<uint8_t>());
        scale = Tensor::empty(cpu_allocator(), scale_dtype, sdims.data(), nd);
        std::copy(g.scale.begin(), g.scale.end(), static_cast<uint8_t*>(scale.view().data));
    }
    HostGrouped(int64_t N, int64_t K_, int bits_, int64_t group_, DType scale_dtype, uint64_t seed)
        : HostGrouped({N, K_}, bits_, group_, scale_dtype, seed) {}

    ops::WeightView view() const {
        return ops::WeightView::grouped(codes.view(), scale.view(), bits, group, K);
    }
    Tensor dense() const {
        ops::HostDense d = ops::dense_on_host(view());
        return clone(d.view);
    }
};

struct DeviceGrouped {
    Tensor codes, scale;
    ops::WeightView view;
    DeviceGrouped(const ops::ExecContext& c, const HostGrouped& h)
        : codes(to_device(c, h.codes, h.codes.view().dtype)),
          scale(to_device(c, h.scale, h.scale.view().dtype)),
          view(ops::WeightView::grouped(codes.view(), scale.view(), h.bits, h.group, h.K)) {}
};

} // namespace ninfer::test
