// The entry of gated_delta_rule's chunked route on CUDA (gated_delta_rule_chunked.h): bf16
// activations whose shapes suit it take the tensor-core route (prepare + scan passes,
// gated_delta_rule_chunked_tc.cuh); F32 activations and the rest take the f32 route. Both need more
// shared memory per block than sm_86 / sm_89 / sm_120 have at dk = dv = 128
// (gated_delta_rule_chunked_fits), where gated_delta_rule runs the recurrence instead.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gated_delta_rule_chunked_tc.cuh"

#include <type_traits>

namespace ninfer::ops::cuda {
namespace {

// The tensor-core route copies 16-byte segments of q, k and v rows (8 bf16) and tiles dk, dv
// by 8 up to 128.
bool tc_supported(const GdnArgs& a) {
    const bool dims = a.dk % 8 == 0 && a.dv % 8 == 0 && a.dk <= gdn_tc::kDk && a.dv <= 128;
    const bool strides = a.q_s0 % 8 == 0 && a.q_s1 % 8 == 0 && a.k_s0 % 8 == 0 && a.k_s1 % 8 == 0 &&
                         a.v_s0 % 8 == 0 && a.v_s1 % 8 == 0;
    return dims && strides && aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
}

// The tensor-core passes' 160 KB of shared memory per block: sm_80, sm_90, sm_100, not the 99 KB
// of sm_86 / sm_89 / sm_120.
bool tc_fits(const ExecContext& ctx, const GdnArgs& a) {
    const int device = ctx.device.index;
    return tc_supported(a) && shared_memory_fits(device, gdn_tc_prepare_smem_bytes()) &&
           shared_memory_fits(device, gdn_tc_scan_smem_bytes(4));
}

} // namespace

template <typename T> bool gated_delta_rule_chunked_fits(const ExecContext& ctx, const GdnArgs& a) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
        if (tc_fits(ctx, a)) return true;
    return gated_delta_rule_chunked_fp32_fits(ctx, a);
}

template <typename T>
void gated_delta_rule_chunked(const ExecContext& ctx, const GdnArgs& a, int num_seqs, int num_rows,
                              int max_rows_per_seq) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        if (tc_fits(ctx, a)) {
            Allocator& alloc = allocator(ctx.device);
            using gdn_tc::kChunk;
            Tensor Tb =
                Tensor::empty(alloc, DType::BF16, {num_rows, a.Hv, gdn_tc::kPieces, kChunk});
            Tensor A = Tensor::empty(alloc, DType::BF16, {num_rows, a.Hv, kChunk});
            Tensor scal = Tensor::empty(alloc, DType::F32, {num_rows, a.Hv, 4});
            const gdn_tc::TcWork w{Tb.ptr<__nv_bfloat16>(), A.ptr<__nv_bfloat16>(),
                                   reinterpret_cast<float4*>(scal.ptr<float>())};
            gdn_tc_prepare(ctx, a, w, num_seqs, (max_rows_per_seq + kChunk - 1) / kChunk);
            gdn_tc_scan(ctx, a, w, num_seqs, gdn_tc_scan_warps(ctx, num_seqs, a.Hv));
            return;
        }
    }
    gated_delta_rule_chunked_fp32<T>(ctx, a, num_seqs, num_rows, max_rows_per_seq);
}

template bool gated_delta_rule_chunked_fits<float>(const ExecContext&, const GdnArgs&);
template bool gated_delta_rule_chunked_fits<__nv_bfloat16>(const ExecContext&, const GdnArgs&);
template void gated_delta_rule_chunked<float>(const ExecContext&, const GdnArgs&, int, int, int);
template void gated_delta_rule_chunked<__nv_bfloat16>(const ExecContext&, const GdnArgs&, int, int,
                                                      int);

} // namespace ninfer::ops::cuda
