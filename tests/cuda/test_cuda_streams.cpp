// Per-stream resources (the cuBLAS handle with its 32 MiB workspace, the op workspace) go with
// the stream that create_stream made: a process that makes and drops many engines, as the model
// tests do, must not keep one of each per engine.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/cuda_test_util.h"
#include "ops/attention.h"
#include "ops/linear.h"

namespace ninfer::test {
namespace {

size_t free_device_bytes() {
    size_t free = 0, total = 0;
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return free;
}

// Device inputs made once, on the default stream, outside the measurement.
struct Inputs {
    static constexpr int32_t kBlock = 16, kKeys = 1024;
    static constexpr int64_t kHeads = 16, kKvHeads = 2, kDim = 256; // the 35B's attention
    explicit Inputs(const ops::ExecContext& c)
        : batch(c, {SeqSpec{1, kKeys - 1, 0, blocks()}}, kBlock),
          x(to_device(c, random_tensor({16, 512}, 1, 1.0f), DType::BF16)),
          w(to_device(c, random_tensor({256, 512}, 2, 0.02f), DType::BF16)),
          y(to_device(c, zeros({16, 256}), DType::BF16)),
          q(to_device(c, random_tensor({1, kHeads, kDim}, 3, 1.0f), DType::BF16)),
          kc(to_device(c, random_tensor({kKeys / kBlock, kBlock, kKvHeads, kDim}, 4, 1.0f),
                       DType::BF16)),
          vc(to_device(c, random_tensor({kKeys / kBlock, kBlock, kKvHeads, kDim}, 5, 1.0f),
                       DType::BF16)),
          out(to_device(c, zeros({1, kHeads, kDim}), DType::BF16)) {}
    static std::vector<int32_t> blocks() {
        std::vector<int32_t> b;
        for (int32_t i = 0; i < kKeys / kBlock; ++i) b.push_back(i);
        return b;
    }
    DualBatch batch;
    Tensor x, w, y, q, kc, vc, out;
};

// One stream's life: cuBLAS (16 rows take linear's cuBLAS route: its handle and workspace) and a
// split-K decode attention (its partials live in the stream's workspace); then it is dropped.
void use_and_drop_a_stream(const Inputs& in) {
    ops::ExecContext ctx = cuda_ctx(DType::BF16);
    std::shared_ptr<void> stream = ops::create_stream(ctx.device);
    ctx.stream = stream.get();
    ops::bind_device(ctx);
    ops::linear(ctx, in.x, in.w, in.y, false);
    ops::paged_attention(ctx, in.q, in.kc, in.vc, in.batch.device(), 1.0f / 16.0f, in.out);
    ops::synchronize(ctx);
}

TEST(CudaStreams, ResourcesAreFreedWithTheStream) {
    const ops::ExecContext c = cuda_ctx(DType::BF16);
    const Inputs in(c);
    use_and_drop_a_stream(in); // the libraries' one-time state, outside the measurement
    ops::bind_device(c);
    const size_t before = free_device_bytes();
    constexpr int kStreams = 8;
    for (int i = 0; i < kStreams; ++i) use_and_drop_a_stream(in);
    ops::bind_device(c);
    const size_t after = free_device_bytes();
    // Kept resources would hold 33 MiB per stream (32 of cuBLAS workspace, 1 of op workspace):
    // 264 MiB here; the op workspaces alone 8 MiB, above the slack.
    constexpr size_t kSlack = size_t(6) << 20;
    EXPECT_GE(after + kSlack, before) << "before " << before << " after " << after;
}

} // namespace
} // namespace ninfer::test

namespace ninfer::test {
namespace {

// copy_many moves row 1 of each tensor (a state row: F32 and BF16 tensors of several sizes, as
// StatePool lays them out) to row 2, in one batch on an engine stream and one by one on the
// legacy stream; every other row stays as it was.
TEST(CudaStreams, CopyManyCopiesEveryTensorOfARow) {
    for (int engine_stream = 0; engine_stream < 2; ++engine_stream) {
        ops::ExecContext ctx = cuda_ctx(DType::BF16);
        std::shared_ptr<void> stream;
        if (engine_stream) {
            stream = ops::create_stream(ctx.device);
            ctx.stream = stream.get();
        }
        std::vector<Tensor> host, dev;
        std::vector<TensorView> src, dst;
        const std::vector<std::pair<int64_t, DType>> layers = {
            {7, DType::F32}, {4096, DType::BF16}, {1, DType::F32}, {65536 + 3, DType::F32}};
        for (size_t l = 0; l < layers.size(); ++l) {
            host.push_back(random_tensor({4, layers[l].first}, uint64_t(10 + l), 1.0f));
            dev.push_back(to_device(ctx, host.back(), layers[l].second));
            src.push_back(dev.back().view().narrow(0, 1, 1));
            dst.push_back(dev.back().view().narrow(0, 2, 1));
        }
        ops::copy_many(ctx, src, dst);
        for (size_t l = 0; l < layers.size(); ++l) {
            const std::vector<float> want = floats(rounded(host[l], layers[l].second));
            const std::vector<float> got = floats(to_host(ctx, dev[l]));
            const size_t n = size_t(layers[l].first);
            for (size_t row = 0; row < 4; ++row)
                for (size_t i = 0; i < n; ++i) {
                    const size_t from = (row == 2 ? 1 : row) * n + i;
                    ASSERT_EQ(got[row * n + i], want[from])
                        << "stream " << engine_stream << " layer " << l << " row " << row;
                }
        }
    }
}

} // namespace
} // namespace ninfer::test
