// TensorView layout queries: contiguity of dense, sliced and empty views.
#include <gtest/gtest.h>

#include <vector>

#include "core/tensor.h"

namespace ninfer {
namespace {

TEST(TensorView, ContiguityOfDenseSlicedAndEmptyViews) {
    std::vector<float> data(24);
    const TensorView dense =
        TensorView::contiguous(data.data(), DType::F32, Device::cpu(), {2, 3, 4});
    EXPECT_TRUE(dense.is_contiguous());
    EXPECT_TRUE(dense.narrow(0, 1, 1).is_contiguous());  // one leading row: still dense
    EXPECT_FALSE(dense.narrow(2, 0, 2).is_contiguous()); // a column slice skips elements
    // Zero-sized views hold nothing, so any strides describe them (uploads of k = 0 top-k
    // buffers, for one, must not be refused).
    for (auto dims : {std::vector<int64_t>{2, 0}, {0, 5}, {3, 0, 2}}) {
        const TensorView empty = TensorView::contiguous(data.data(), DType::I32, Device::cpu(),
                                                        dims.data(), int(dims.size()));
        EXPECT_EQ(empty.numel(), 0);
        EXPECT_TRUE(empty.is_contiguous()) << empty.describe();
    }
    EXPECT_TRUE(dense.narrow(1, 0, 0).is_contiguous());
}

} // namespace
} // namespace ninfer
