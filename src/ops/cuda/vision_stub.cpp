// Stand-ins for the vision ops' CUDA bodies in builds without CUDA (NINFER_CUDA=OFF), as
// cuda_stub.cpp for the others: each raises Unsupported.
#include "core/error.h"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

[[noreturn]] void no_cuda(const char* what) {
    fail(ErrorCategory::Unsupported,
         "a CUDA device needs a CUDA build, and this build of ninfer has no CUDA backend (built "
         "without CUDA: rebuild with nvcc installed and -DNINFER_CUDA=ON, or use --device cpu; "
         "from ", what, ")");
}

} // namespace

// clang-format off
void layer_norm(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, float, const TensorView&) { no_cuda("layer_norm"); }
void bias_act(const ExecContext&, const TensorView&, const TensorView&, Activation) { no_cuda("bias_act"); }
void rope_table(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, int64_t) { no_cuda("rope_table"); }
void segment_attention(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
bool segment_attention_flash_supported(const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("segment_attention"); }
void segment_attention_flash(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
void segment_attention_general(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
// clang-format on

} // namespace ninfer::ops::cuda
