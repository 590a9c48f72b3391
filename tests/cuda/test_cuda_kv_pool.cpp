// The paged KV pool on CUDA (label cuda): every plane starts at zero, whatever the memory pool
// held before. Attention reads a block's rows past its sequence's context (masked, but cuDNN's
// SDPA and the flash kernels multiply whole key tiles of V by P, and 0 x NaN is NaN): NaN left
// there by an earlier user of the memory (the bf16 35B's profile forward at a 65,536-row budget)
// stopped 45% of a serving run's requests with non-finite logits. And a failed request's freed
// blocks (Scheduler::finish's CacheOp::ZeroBlock) go back to zero on the device.
#include <cstring>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/memory.h"
#include "runtime/kv_pool.h"

namespace ninfer::test {
namespace {

// Every plane of the pool: K and V codes (and scales where quantized), then the drafter's.
std::vector<TensorView> every_plane(const runtime::KvPool& pool) {
    std::vector<TensorView> planes;
    for (const auto* views : {&pool.k_views(), &pool.v_views()})
        for (const ops::KvPlane& p : *views) {
            planes.push_back(p.data);
            if (p.quantized()) planes.push_back(p.scale);
        }
    for (const TensorView& p : pool.draft_views()) planes.push_back(p);
    return planes;
}

TEST(CudaKvPool, EveryPlaneStartsAtZeroOverStaleMemory) {
    const auto c = cuda_ctx(DType::BF16);
    model::CacheSpec spec;
    spec.attention_layers = 2, spec.kv_heads = 2, spec.head_dim = 256;
    spec.draft_layers = 1, spec.draft_kv_heads = 2, spec.draft_head_dim = 128;
    const int64_t blocks = 4096, bs = 16; // 2 x 2 planes of 64 MiB, then the drafter's 2 x 32
    for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8}) {
        leave_nan_in_pool(c, int64_t(1) << 30); // more than the KV pool
        runtime::KvPool pool(spec, blocks, int32_t(bs), c, DType::BF16, kv);
        const std::vector<TensorView> planes = every_plane(pool);
        ASSERT_EQ(planes.size(), kv == ops::KvDtype::Activation ? 6u : 10u);
        for (size_t i = 0; i < planes.size(); ++i) {
            const Tensor host = to_host(c, planes[i]); // floats as f32: +0 has zero bytes
            const auto* bytes = static_cast<const unsigned char*>(host.view().data);
            int64_t nonzero = 0;
            for (int64_t b = 0; b < host.view().nbytes(); ++b) nonzero += bytes[b] != 0;
            EXPECT_EQ(nonzero, 0) << "plane " << i << " of kv dtype " << int(kv);
        }
    }
}

// zero_block on the device: one block of every plane (bf16 or int8 codes and scales, the
// drafter's) back to zero bytes, its neighbours untouched.
TEST(CudaKvPool, ZeroBlockClearsOneBlockOnTheDevice) {
    const auto c = cuda_ctx(DType::BF16);
    model::CacheSpec spec;
    spec.attention_layers = 2, spec.kv_heads = 2, spec.head_dim = 72; // int8: a partial group
    spec.draft_layers = 1, spec.draft_kv_heads = 2, spec.draft_head_dim = 64;
    const int32_t blocks = 5, bs = 16;
    for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8}) {
        runtime::KvPool pool(spec, blocks, bs, c, DType::BF16, kv);
        const std::vector<TensorView> planes = every_plane(pool);
        for (const TensorView& p : planes) { // every byte 0x5a
            Tensor fill = Tensor::empty(cpu_allocator(), p.dtype, p.shape.data(), p.ndim);
            std::memset(fill.view().data, 0x5a, size_t(fill.view().nbytes()));
            ops::upload(c, fill.view(), p);
        }
        pool.zero_block(c, 3);
        ops::synchronize(c);
        for (size_t i = 0; i < planes.size(); ++i) {
            const TensorView& p = planes[i];
            Tensor host = Tensor::empty(cpu_allocator(), p.dtype, p.shape.data(), p.ndim);
            ops::download(c, p, host.view());
            ops::synchronize(c);
            const auto* bytes = static_cast<const unsigned char*>(host.view().data);
            const int64_t per_block = host.view().nbytes() / blocks;
            int64_t wrong = 0;
            for (int64_t b = 0; b < host.view().nbytes(); ++b)
                wrong += bytes[b] != (b / per_block == 3 ? 0 : 0x5a);
            EXPECT_EQ(wrong, 0) << "plane " << i << " of kv dtype " << int(kv);
        }
    }
}

} // namespace
} // namespace ninfer::test
