// linear_fp8's W8A8 route (linear_fp8.h) on cuBLASLt's block-scaled fp8 matmul, the
// checkpoints' `activation_scheme: dynamic`. cuBLASLt has these 128 x 128 block scales on sm_90
// only (has_block_scaled_fp8_matmul, asked per device): elsewhere, and in portable mode,
// linear_w8a8_fits is false and linear_fp8 takes its other routes.
//   1. quantize_rows_fp8: x [T, K] bf16 -> codes [T, K] e4m3 and scales [T, K / 128] f32, one
//      warp per (row, 128-column group): s = max(amax, 1e-12) / 448, code = e4m3_rn(x / s)
//      (IEEE division, saturating), so |code| <= 448 and x ~ code * s;
//   2. cuBLASLt: y[T, N] (+)= sum_k (x_code s_x)[t, k] (w_code s_w)[n, k], f32 accumulation, y
//      rounded once. In cuBLAS's column-major terms (as linear.cu): D (N x T) = op(A) B with
//      A = the weight codes viewed K x N (ld K, transposed) and BLK128x128_32F scales, whose
//      layout ceil(K/128) x ceil(N/128) column-major is the checkpoint's [N/128, K/128]
//      row-major; B = the activation codes viewed K x T (ld K) with VEC128_32F scales stored
//      outer-dimension-major, [K/128, T] row-major (the layout measured to match on the H200:
//      [T, K/128] gave wrong products). cuBLASLt takes such a B only for T % 4 == 0 (16-byte
//      scale rows), so other T run on Tp = T rounded up to 4 (zero rows past T) into a scratch
//      D, whose first T rows are then added to (or written over) y.
// The algorithm for each (T, N, K, ld_y, beta) comes from cuBLASLt's heuristic once and is cached;
// shapes the heuristic has no algorithm for report false and take another route.
#include <cublasLt.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/fp8_codes.cuh"
#include "ops/cuda/linear_fp8.h"
#include "ops/memory.h"

namespace ninfer::ops::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int64_t kGroup = 128;        // activation scale group = the weight's block columns
constexpr size_t kWorkspaceBytes = size_t(32) << 20; // NVIDIA's recommendation for Hopper

// One warp per (row, group): lane l holds columns [4 l, 4 l + 4) of the group (one 8-byte load).
// Rows in [T, Tp) (padding) get zero codes.
__global__ void quantize_rows_fp8_kernel(const bf16* x, int64_t x_s0, int64_t T, int64_t Tp,
                                         int64_t K, uint8_t* codes, float* scales) {
    const int64_t groups = K / kGroup;
    const int64_t w = blockIdx.x * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
    if (w >= Tp * groups) return;
    const int64_t t = w / groups, g = w % groups;
    const int lane = threadIdx.x & 31;
    const int64_t col = g * kGroup + lane * 4;
    uint2 raw = make_uint2(0, 0);
    if (t < T) raw = *reinterpret_cast<const uint2*>(x + t * x_s0 + col);
    float v[4];
    bf16x4_to_float(raw, v);
    float s = 0.0f;
    *reinterpret_cast<uint32_t*>(codes + t * K + col) = quantize_group4_e4m3(v, &s);
    if (lane == 0) scales[g * Tp + t] = s; // outer-dimension-major: [K / 128, Tp]
}

// y[t, n] = (accumulate ? y[t, n] : 0) + d[t, n] for t < T (d: [*, N] contiguous).
__global__ void add_rows_kernel(const bf16* d, int64_t T, int64_t N, bf16* y, int64_t y_s0,
                                bool accumulate) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= T * N) return;
    const int64_t t = i / N, n = i % N;
    bf16* o = y + t * y_s0 + n;
    *o = accumulate ? __float2bfloat16_rn(__bfloat162float(*o) + __bfloat162float(d[i])) : d[i];
}

int64_t padded_rows(int64_t T) {
    return (T + 3) / 4 * 4;
}

void check_lt(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        fail(ErrorCategory::Cuda, what, ": cuBLASLt status ", int(status));
}

// The device's cuBLASLt handle (it holds no stream) and the algorithms found per shape.
using ShapeKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool>;
struct LtState {
    std::mutex mutex;
    std::map<int, cublasLtHandle_t> handles;
    std::map<ShapeKey, std::pair<bool, cublasLtMatmulAlgo_t>> algos; // false: none found
};
LtState& lt_state() {
    static LtState s;
    return s;
}

// RAII for the descriptors of one call.
struct LtCall {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtCall() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

template <typename V>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
    check_lt(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)), "cuBLASLt attr");
}

// cuBLASLt's heuristic assumes 256-byte aligned buffers unless told otherwise
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES); allocations are, views into them may not be, and
// those take another route.
bool aligned256(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 256 == 0;
}

} // namespace

bool linear_w8a8_fits(const TensorView& x, const WeightView& w, const TensorView& y) {
    if (!has_block_scaled_fp8_matmul(x.device.index)) return false;
    if (x.ndim != 2 || y.ndim != 2 || !w.is_fp8() || w.w.ndim != 2) return false;
    const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
    return x.dtype == DType::BF16 && y.dtype == DType::BF16 && w.size(1) == K &&
           w.block_rows == kGroup && w.block_cols == kGroup && K % kGroup == 0 && N % 16 == 0 &&
           x.rows_contiguous() && (T == 1 || x.stride[0] % 4 == 0) &&
           reinterpret_cast<uintptr_t>(x.data) % 8 == 0 && y.rows_contiguous() &&
           y.size(0) == T && y.size(1) == N && (T == 1 || y.stride[0] % 8 == 0) &&
           aligned256(y.data) && aligned256(w.w.data) && aligned256(w.scale.data) &&
           w.w.is_contiguous() && w.scale.is_contiguous() && T < (int64_t(1) << 31) &&
           N < (int64_t(1) << 31) && K < (int64_t(1) << 31);
}

void quantize_rows_fp8(const ExecContext& ctx, const TensorView& x, const TensorView& codes,
                       const TensorView& scales) {
    const int64_t T = x.size(0), K = x.size(1);
    require(x.dtype == DType::BF16 && K % kGroup == 0 && x.rows_contiguous() &&
                (T <= 1 || x.stride[0] % 4 == 0) && reinterpret_cast<uintptr_t>(x.data) % 8 == 0,
            "quantize_rows_fp8: BF16 x [T, K] with K % 128 == 0 and 8-byte aligned rows, got ",
            x.describe());
    const int64_t Tp = codes.ndim == 2 ? codes.size(0) : 0;
    require(codes.dtype == DType::F8E4M3 && codes.is_contiguous() && codes.ndim == 2 && Tp >= T &&
                codes.size(1) == K && scales.dtype == DType::F32 && scales.is_contiguous() &&
                scales.ndim == 2 && scales.size(0) == K / kGroup && scales.size(1) == Tp,
            "quantize_rows_fp8: codes F8E4M3 [Tp, K] and scales F32 [K / 128, Tp] (Tp >= T) "
            "expected, got ",
            codes.describe(), " and ", scales.describe());
    const int64_t warps = Tp * (K / kGroup);
    if (warps == 0) return;
    constexpr int kWarpsPerBlock = 8;
    quantize_rows_fp8_kernel<<<unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock),
                               32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(
        x.ptr<bf16>(), x.stride[0], T, Tp, K, codes.ptr<uint8_t>(), scales.ptr<float>());
    check_launch("quantize_rows_fp8");
}

bool linear_w8a8(const ExecContext& ctx, const TensorView& x, const WeightView& w,
                 const TensorView& y, bool accumulate) {
    if (!has_block_scaled_fp8_matmul(x.device.index))
        fail(ErrorCategory::Unsupported, "linear_w8a8: cuBLASLt's block-scaled fp8 matmul needs "
             "sm_90, cuda:", x.device.index, " is sm_", device_caps(x.device.index).arch,
             portable_kernels() ? " (portable mode)" : "");
    require(linear_w8a8_fits(x, w, y), "linear_w8a8: needs BF16 x and y, K % 128 == 0, N % 16 == 0, ",
            "128 x 128 blocks and 16-byte aligned rows; got x ", x.describe(), ", w ",
            w.w.describe(), ", y ", y.describe());
    check_weight("linear_w8a8", "w", w);
    const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
    if (T == 0 || N == 0) return true;
    const int64_t Tp = padded_rows(T);
    const bool direct = Tp == T; // D = y; otherwise a scratch D of Tp rows
    const int64_t ld_d = direct && T > 1 ? y.stride[0] : N;
    LtState& st = lt_state();
    std::unique_lock lock(st.mutex);
    cublasLtHandle_t& handle = st.handles[ctx.device.index];
    if (!handle) check_lt(cublasLtCreate(&handle), "cublasLtCreate");

    LtCall call;
    check_lt(cublasLtMatmulDescCreate(&call.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
             int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
             int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    check_lt(cublasLtMatrixLayoutCreate(&call.a, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(N), K), "A");
    check_lt(cublasLtMatrixLayoutCreate(&call.b, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(Tp), K), "B");
    check_lt(cublasLtMatrixLayoutCreate(&call.d, CUDA_R_16BF, uint64_t(N), uint64_t(Tp), ld_d), "D");

    const bool beta_one = direct && accumulate;
    const ShapeKey key{ctx.device.index, Tp, N, K, ld_d, beta_one};
    auto found = st.algos.find(key);
    if (found == st.algos.end()) {
        check_lt(cublasLtMatmulPreferenceCreate(&call.pref), "preference");
        check_lt(cublasLtMatmulPreferenceSetAttribute(call.pref,
                                                      CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
                 "preference workspace");
        // Scale pointers take part in the heuristic's checks: any valid device address serves.
        set_attr(call.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w.scale.data);
        set_attr(call.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, w.scale.data);
        cublasLtMatmulHeuristicResult_t result{};
        int returned = 0;
        const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
            handle, call.desc, call.a, call.b, call.d, call.d, call.pref, 1, &result, &returned);
        const bool ok = status == CUBLAS_STATUS_SUCCESS && returned > 0;
        found = st.algos.emplace(key, std::pair{ok, result.algo}).first;
    }
    if (!found->second.first) return false;
    const cublasLtMatmulAlgo_t algo = found->second.second;
    lock.unlock();

    Allocator& a = allocator(ctx.device);
    Tensor codes = Tensor::empty(a, DType::F8E4M3, {Tp, K});
    Tensor scales = Tensor::empty(a, DType::F32, {K / kGroup, Tp});
    Tensor workspace = Tensor::empty(a, DType::U8, {int64_t(kWorkspaceBytes)});
    Tensor scratch;
    if (!direct) scratch = Tensor::empty(a, DType::BF16, {Tp, N});
    void* d = direct ? y.data : scratch.view().data;
    quantize_rows_fp8(ctx, x, codes, scales);
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w.scale.data);
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales.view().data);
    const float alpha = 1.0f, beta = beta_one ? 1.0f : 0.0f;
    check_lt(cublasLtMatmul(handle, call.desc, &alpha, w.w.data, call.a, codes.view().data, call.b,
                            &beta, d, call.d, d, call.d, &algo, workspace.view().data,
                            kWorkspaceBytes, stream_of(ctx)),
             "cublasLtMatmul (fp8 block-scaled)");
    if (!direct) {
        const int64_t n = T * N;
        add_rows_kernel<<<unsigned((n + 255) / 256), 256, 0, stream_of(ctx)>>>(
            scratch.ptr<bf16>(), T, N, y.ptr<bf16>(), T > 1 ? y.stride[0] : N, accumulate);
        check_launch("add_rows_kernel");
    }
    return true;
}

} // namespace ninfer::ops::cuda
