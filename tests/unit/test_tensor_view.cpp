// TensorView layout queries and views: contiguity of dense, sliced and empty views; heads.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
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

TEST(TensorView, SplitHeadsOfColumnRanges) {
    std::vector<float> data(3 * 20);
    const TensorView m = TensorView::contiguous(data.data(), DType::F32, Device::cpu(), {3, 20});
    const TensorView packed = m.split_heads(4, 2, 5); // columns [4, 14) as 2 heads of 5
    EXPECT_EQ(packed.ndim, 3);
    EXPECT_EQ(packed.size(1), 2);
    EXPECT_EQ(packed.size(2), 5);
    EXPECT_EQ(packed.at<float>(2, 1, 3), &data[2 * 20 + 4 + 5 + 3]);
    // Interleaved heads (the query halves of a fused projection): head h at column 10 h.
    const TensorView every_other = m.split_heads(0, 2, 5, 10);
    EXPECT_EQ(every_other.at<float>(1, 1, 4), &data[20 + 10 + 4]);
    EXPECT_THROW(m.split_heads(12, 2, 5), Error);     // columns [12, 22) leave the row
    EXPECT_THROW(packed.split_heads(0, 1, 1), Error); // not a 2-D view
}

} // namespace
} // namespace ninfer
