// Implements ops/rope_table.h on CUDA: one block per row, threads over (head, frequency) pairs.
// Each product is rounded before the sum (__fmul_rn / __fadd_rn: no FMA contraction), as HF's
// q * cos + rotate_half(q) * sin in f32.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

template <typename T>
__global__ void rope_table_rows(RowView x, int64_t heads, const float* cos, const float* sin,
                                int half) {
    pdl_wait_and_release();
    const int64_t t = blockIdx.x;
    const float* ct = cos + t * half;
    const float* st = sin + t * half;
    for (int64_t p = threadIdx.x; p < heads * half; p += blockDim.x) {
        const int64_t h = p / half;
        const int i = int(p % half);
        const float c = ct[i], s = st[i];
        T* xh = x.row<T>(t * heads + h);
        const float a = to_float(xh[i]), b = to_float(xh[i + half]);
        xh[i] = from_float<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
        xh[i + half] = from_float<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
}

} // namespace

void rope_table(const ExecContext& ctx, const TensorView& x, const TensorView& cos,
                const TensorView& sin, int64_t rotary_dim) {
    const int64_t T = x.size(0), heads = x.size(1);
    if (T == 0 || heads == 0) return;
    const int64_t pairs = heads * (rotary_dim / 2);
    const int threads = pairs >= 512 ? 256 : 128;
    dispatch_float(x.dtype, "rope_table", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, rope_table_rows<E>, unsigned(T), threads, 0, row_view(x), heads,
                   cos.ptr<float>(), sin.ptr<float>(), int(rotary_dim / 2));
    });
    check_launch("rope_table_rows");
}

} // namespace ninfer::ops::cuda
