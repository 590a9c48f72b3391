#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle, bench_fp8_ops and ninfer
# (NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer test_cuda_bundle
# bench_fp8_ops; carry [".deps/gpu.tar.xz"]): the W8A8 grouped MoE route for block-wise fp8
# experts (src/ops/cuda/moe_w8a8.cu, moe_grouped_sm90_fp8.cu).
#   tests: its cuda tests on both GEMM shapes (wgmma_w8a8 and the swapped wgmma_w8a8_swap), with
#          the sabotage arm, and the fp8 suites beside it, stopping on a failure;
#   ops:   bench_fp8_ops (moe_experts.fp8's kernels forced, one run; the linear routes too);
#   pp:    the fp8 35B's prefill at 2,048 and 8,192 rows with the built-in table (wgmma_w8a8)
#          and with a table keeping moe_experts.fp8 on mma_sync, twice each, interleaved.
#   bash tools/gpu/w8a8_check.sh [tests|ops|pp|all]...      logs and JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/route_ab.sh "$@"
if want tests; then
    # Each GEMM shape's CudaMoeW8a8 cases in a process of their own beside the rest: each
    # 35B-shape case spends ~75-90 s in its FP64 host reference (one process of all of them ran
    # past 300 s on an H100).
    pids=()
    for shape in swapped rows; do
        gate_test w8a8_$shape 420 /tmp/g/test_cuda_bundle \
            --gtest_filter="*CudaMoeW8a8*/$shape" &
        pids+=($!)
    done
    gate_test w8a8_tests 420 /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaMoeFp8*:*CudaLinearFp8*:*CudaRouteTable*'
    for pid in "${pids[@]}"; do wait "$pid" || { echo "== FAILED w8a8 GEMM cases: stopping"; exit 1; }; done
fi
if want ops; then
    timeout 240 /tmp/g/bench_fp8_ops 5 | tee "$out/fp8_ops.jsonl" || rc=1
fi
table=/tmp/mma_sync_table.json
route_ab_table "$table" moe_experts.fp8 mma_sync wgmma_w8a8 "$route_ab_never"
if want pp; then
    route_ab_interleaved configs/qwen3.6-35b-a3b-fp8.json "" wgmma_w8a8 mma_sync "$table"
fi
exit $rc
