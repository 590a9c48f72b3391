// The paged KV pool on CUDA (label cuda): every plane starts at zero, whatever the memory pool
// held before. Attention reads a block's rows past its sequence's context (masked, but cuDNN's
// SDPA and the flash kernels multiply whole key tiles of V by P, and 0 x NaN is NaN): NaN left
// there by an earlier user of the memory (the bf16 35B's profile forward at a 65,536-row budget)
// stopped 45% of a serving run's requests with non-finite logits.
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/memory.h"
#include "runtime/kv_pool.h"

namespace ninfer::test {
namespace {

TEST(CudaKvPool, EveryPlaneStartsAtZeroOverStaleMemory) {
    const auto c = cuda_ctx(DType::BF16);
    model::CacheSpec spec;
    spec.attention_layers = 2, spec.kv_heads = 2, spec.head_dim = 256;
    spec.draft_layers = 1, spec.draft_kv_heads = 2, spec.draft_head_dim = 128;
    const int64_t blocks = 4096, bs = 16; // 2 x 2 planes of 64 MiB, then the drafter's 2 x 32
    for (ops::KvDtype kv : {ops::KvDtype::Activation, ops::KvDtype::Int8}) {
        leave_nan_in_pool(c, int64_t(1) << 30); // more than the KV pool
        runtime::KvPool pool(spec, blocks, int32_t(bs), c, DType::BF16, kv);
        std::vector<TensorView> planes;
        for (const auto* views : {&pool.k_views(), &pool.v_views()})
            for (const ops::KvPlane& p : *views) {
                planes.push_back(p.data);
                if (p.quantized()) planes.push_back(p.scale);
            }
        for (const TensorView& p : pool.draft_views()) planes.push_back(p);
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

} // namespace
} // namespace ninfer::test
