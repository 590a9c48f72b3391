// moe_grouped_sm90.h and moe_grouped_sm90_fp8.h in builds without the kernels (no sm_90 in CMAKE_CUDA_ARCHITECTURES, or no
// CUTLASS headers: cmake/cutlass.cmake): the routes never fit, so moe.cu takes the mma.sync
// grouped GEMMs.
#include "core/error.h"
#include "ops/cuda/moe_grouped_sm90.h"
#include "ops/cuda/moe_grouped_sm90_fp8.h"

namespace ninfer::ops::cuda {

bool wgmma_grouped_built() {
    return false;
}

bool wgmma_grouped_fits(const ExecContext&, const WgmmaGroupedGemm&) {
    return false;
}

void wgmma_grouped_gemm(const ExecContext&, const WgmmaGroupedGemm&) {
    fail(ErrorCategory::Unsupported, "wgmma grouped GEMM: this build has no sm_90a image of it "
         "(CUTLASS headers or sm_90 missing at configure time: cmake/cutlass.cmake)");
}

bool wgmma_fp8_grouped_built() {
    return false;
}

bool wgmma_fp8_grouped_fits(const ExecContext&, const WgmmaFp8GroupedGemm&) {
    return false;
}

void wgmma_fp8_grouped_gemm(const ExecContext&, const WgmmaFp8GroupedGemm&) {
    fail(ErrorCategory::Unsupported, "wgmma fp8 grouped GEMM: this build has no sm_90a image of "
         "it (CUTLASS headers or sm_90 missing at configure time: cmake/cutlass.cmake)");
}

} // namespace ninfer::ops::cuda
