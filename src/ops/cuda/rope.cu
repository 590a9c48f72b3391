// Implements ops/rope.h on CUDA: one block per row, threads over (head, frequency) pairs.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

template <typename T>
__global__ void rope_rows(RowView x, int64_t heads, const int32_t* positions, int half,
                          double theta) {
    pdl_wait_and_release();
    const int64_t t = blockIdx.x;
    const float pos = float(positions[t]);
    for (int64_t p = threadIdx.x; p < heads * half; p += blockDim.x) {
        const int64_t h = p / half;
        const int j = int(p % half);
        // inv_freq as an f32 value (correctly rounded, as the CPU backend); angle in f32 as HF.
        const float inv_freq = float(1.0 / pow(theta, double(2 * j) / double(2 * half)));
        float s, c;
        sincosf(pos * inv_freq, &s, &c);
        T* xh = x.row<T>(t * heads + h);
        const float a = to_float(xh[j]), b = to_float(xh[j + half]);
        xh[j] = from_float<T>(a * c - b * s);
        xh[j + half] = from_float<T>(b * c + a * s);
    }
}

} // namespace

void rope(const ExecContext& ctx, const TensorView& x, const TensorView& positions,
          int64_t rotary_dim, double theta) {
    const int64_t T = x.size(0), heads = x.size(1);
    if (T == 0) return;
    dispatch_float(x.dtype, "rope", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, rope_rows<E>, unsigned(T), 128, 0, row_view(x), heads,
                   positions.ptr<int32_t>(), int(rotary_dim / 2), theta);
    });
    check_launch("rope_rows");
}

} // namespace ninfer::ops::cuda
