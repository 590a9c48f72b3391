// Implements ops/linear.h on CUDA: the GEMV route (linear_gemv.cu) for few rows, cuBLAS otherwise.
// cuBLAS: y[T, N] = x[T, K] w[N, K]^T: in cuBLAS's column-major terms y^T = w x^T, i.e.
// C (N x T) = op(A) B with A = w viewed K x N (transposed) and B = x viewed K x T.
// BF16 inputs accumulate in f32; F32 inputs use the pedantic f32 path (no TF32), so F32 runs
// match the CPU reference closely.
#include <cublas_v2.h>

#include <map>
#include <mutex>
#include <utility>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_gemv.h"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        fail(ErrorCategory::Cuda, what, ": cuBLAS status ", int(status));
}

// cuBLAS's workspace per handle: the size NVIDIA recommends for Hopper.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// One handle per (device, stream), bound to that stream and to a workspace of its own. The fixed
// workspace matters for CUDA graphs: without one, cuBLAS cannot allocate its default workspace
// while a stream is being captured and picks other algorithms there than in eager runs, so a
// replayed decode step rounded differently from the same step run eagerly. A handle per stream
// also keeps two engines on one device from sharing a handle's stream and workspace. Both go when
// the stream does (on_stream_release).
struct Handle {
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
};
struct Handles {
    std::mutex mutex;
    std::map<std::pair<int, void*>, Handle> by_stream;
};
Handles& handles() {
    static Handles h;
    return h;
}

void release_handle(std::pair<int, void*> key) {
    Handles& all = handles();
    std::lock_guard lock(all.mutex);
    auto it = all.by_stream.find(key);
    if (it == all.by_stream.end()) return;
    cudaSetDevice(key.first);
    if (it->second.handle) cublasDestroy(it->second.handle);
    if (it->second.workspace) cudaFree(it->second.workspace);
    all.by_stream.erase(it);
}

cublasHandle_t handle_for(const ExecContext& ctx) {
    Handles& all = handles();
    std::lock_guard lock(all.mutex);
    const std::pair<int, void*> key{ctx.device.index, ctx.stream};
    Handle& h = all.by_stream[key];
    if (h.handle) return h.handle;
    require(!cuda::capturing(ctx),
            "linear: first cuBLAS use of a stream inside a graph capture (run it eagerly first)");
    check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
    Handle fresh;
    check(cudaMalloc(&fresh.workspace, kCublasWorkspaceBytes), "cuBLAS workspace");
    try {
        check_cublas(cublasCreate(&fresh.handle), "cublasCreate");
        check_cublas(cublasSetStream(fresh.handle, stream_of(ctx)), "cublasSetStream");
        check_cublas(cublasSetWorkspace(fresh.handle, fresh.workspace, kCublasWorkspaceBytes),
                     "cublasSetWorkspace");
    } catch (...) { // nothing half-made stays behind; the next call tries again
        if (fresh.handle) cublasDestroy(fresh.handle);
        cudaFree(fresh.workspace);
        throw;
    }
    h = fresh;
    if (ctx.stream) on_stream_release(ctx.stream, [key] { release_handle(key); });
    return h.handle;
}

cudaDataType cuda_type(DType d) {
    return d == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// Whether two [T, K] views (unit last stride) share a byte.
bool overlaps(const TensorView& a, const TensorView& b) {
    auto span = [](const TensorView& t) {
        const char* begin = static_cast<const char*>(t.data);
        const int64_t elems = (t.size(0) - 1) * t.stride[0] + t.size(1);
        return std::pair{begin, begin + elems * dtype_size(t.dtype)};
    };
    const auto [a0, a1] = span(a);
    const auto [b0, b1] = span(b);
    return a0 < b1 && b0 < a1;
}

} // namespace

bool gemv_preferred(int64_t rows, int64_t weight_bytes) {
    return active_route_table().route(linear_bf16_route(weight_bytes), rows) == kRouteGemv;
}

void linear(const ExecContext& ctx, const TensorView& x, const TensorView& w, const TensorView& y,
            bool accumulate) {
    if (x.size(0) == 0 || w.size(0) == 0) return;
    if (gemv_preferred(x.size(0), w.nbytes()) && linear_gemv_fits(x, w))
        return linear_gemv(ctx, x, w, y, accumulate);
    linear_cublas(ctx, x, w, y, accumulate);
}

bool rms_norm_linear_fused(const ExecContext& ctx, const TensorView& x, const TensorView& norm_w,
                           float eps, const WeightView& w, const TensorView& y,
                           const TensorView& h, const WeightView* w2, const TensorView* y2) {
    // The fused kernels' block 0 writes h while other blocks still read x: no overlap at all.
    if (!fused_routes_enabled("rms_norm_linear") || overlaps(h, x)) return false;
    if (w.is_fp8()) { // where linear would take the fp8 GEMV
        // A BF16 second weight (the GDN's in_proj_ba beside the fp8 in_proj) runs as extra blocks.
        const bool pair = w2 != nullptr;
        if ((pair && w2->is_quantized()) || linear_fp8_route(x, w, y) != Fp8LinearRoute::Gemv)
            return false;
        const TensorView w2v = pair ? w2->w : TensorView{}, y2v = pair ? *y2 : TensorView{};
        if (!rms_norm_linear_gemv_fp8_fits(x, norm_w, w, y, h, w2v, y2v)) return false;
        rms_norm_linear_gemv_fp8(ctx, x, norm_w, eps, w, y, h, w2v, y2v);
        return true;
    }
    if (w2 || w.is_quantized() || !gemv_preferred(x.size(0), w.w.nbytes()) ||
        !rms_norm_linear_gemv_fits(x, norm_w, w.w, h))
        return false;
    rms_norm_linear_gemv(ctx, x, norm_w, eps, w.w, y, h);
    return true;
}

void linear_cublas(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& y, bool accumulate) {
    const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
    if (T == 0 || N == 0) return;
    require(x.dtype == w.dtype && (x.dtype == DType::BF16 || x.dtype == DType::F32),
            "linear: ", "CUDA takes x and w both BF16 or both F32, got ", x.describe(), " and ",
            w.describe());
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const cublasComputeType_t compute =
        x.dtype == DType::F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    check_cublas(cublasGemmEx(handle_for(ctx), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K),
                              &alpha, w.data, cuda_type(w.dtype), int(K), x.data,
                              cuda_type(x.dtype), int(x.stride[0]), &beta, y.data,
                              cuda_type(y.dtype), int(y.stride[0]), compute, CUBLAS_GEMM_DEFAULT),
                 "linear cublasGemmEx");
}

} // namespace ninfer::ops::cuda
