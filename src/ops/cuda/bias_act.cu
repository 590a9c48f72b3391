// Implements ops/bias_act.h on CUDA: a block per row, threads over 16-byte chunks of it (single
// elements when rows are not aligned or N is not a multiple of a chunk).
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

__device__ __forceinline__ float apply(float x, Activation act) {
    if (act == Activation::GeluTanh) {
        const float k = 0.7978845608028654f; // sqrt(2 / pi)
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    if (act == Activation::GeluErf) return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    return x;
}

template <typename T, typename B>
__global__ void bias_act_rows(char* y, int64_t stride, const B* b, int64_t N, Activation act) {
    pdl_wait_and_release();
    T* yr = reinterpret_cast<T*>(y) + int64_t(blockIdx.x) * stride;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
        yr[i] = from_float<T>(apply(to_float(yr[i]) + to_float(b[i]), act));
}

// bf16 rows in chunks of 8 (one uint4).
template <typename B>
__global__ void bias_act_rows_bf16x8(char* y, int64_t stride, const B* b, int64_t N,
                                     Activation act) {
    pdl_wait_and_release();
    __nv_bfloat16* yr = reinterpret_cast<__nv_bfloat16*>(y) + int64_t(blockIdx.x) * stride;
    for (int64_t i = int64_t(threadIdx.x) * 8; i < N; i += int64_t(blockDim.x) * 8) {
        float v[8];
        bf16x8_to_float(*reinterpret_cast<const uint4*>(yr + i), v);
        uint4 raw;
        uint32_t* words = reinterpret_cast<uint32_t*>(&raw);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float lo = apply(v[2 * j] + to_float(b[i + 2 * j]), act);
            const float hi = apply(v[2 * j + 1] + to_float(b[i + 2 * j + 1]), act);
            const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
            words[j] = *reinterpret_cast<const uint32_t*>(&pair);
        }
        *reinterpret_cast<uint4*>(yr + i) = raw;
    }
}

template <typename T, typename B>
void launch(const ExecContext& ctx, const TensorView& y, const TensorView& b, Activation act) {
    const int64_t R = y.size(0), N = y.size(1);
    const int threads = N >= 2048 ? 256 : 128;
    char* data = static_cast<char*>(y.data);
    if constexpr (sizeof(T) == 2) {
        if (N % 8 == 0 && y.stride[0] % 8 == 0 && reinterpret_cast<uintptr_t>(y.data) % 16 == 0) {
            launch_pdl(ctx, bias_act_rows_bf16x8<B>, unsigned(R), threads, 0, data, y.stride[0],
                       b.ptr<B>(), N, act);
            check_launch("bias_act_rows_bf16x8");
            return;
        }
    }
    launch_pdl(ctx, bias_act_rows<T, B>, unsigned(R), threads, 0, data, y.stride[0], b.ptr<B>(), N,
               act);
    check_launch("bias_act_rows");
}

} // namespace

void bias_act(const ExecContext& ctx, const TensorView& y, const TensorView& b, Activation act) {
    if (y.size(0) == 0 || y.size(1) == 0) return;
    dispatch_float(y.dtype, "bias_act", [&](auto tag) {
        using E = decltype(tag);
        if (b.dtype == DType::F32)
            launch<E, float>(ctx, y, b, act);
        else
            launch<E, E>(ctx, y, b, act);
    });
}

} // namespace ninfer::ops::cuda
