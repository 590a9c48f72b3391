#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle, bench_prefill_ops and ninfer
# (tools/gpu/pack_binaries.sh, carry [".deps/gpu.tar.xz"]): the wgmma grouped GEMM of
# moe_experts (src/ops/cuda/moe_grouped_sm90.cu) and the routes beside it.
#   tests: its cuda tests and the MoE suites, stopping on a failure;
#   ops:   bench_prefill_ops moe (each kernel of moe_experts.bf16 forced, in one run);
#   pp:    the 35B's prefill at 2,048 and 8,192 rows with mma_sync (the built-in table) and with a
#          table routing moe_experts.bf16 to wgmma from WGMMA_FROM pairs (default 1,024), twice
#          each, interleaved;
#   serve: 1k/128 at 256 concurrent, the same two tables (tools/gpu/serve_bench.sh's server).
#   bash tools/gpu/wgmma_check.sh [tests|ops|pp|serve|all]...      logs and JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/route_ab.sh "$@"
if want tests; then
    gate_test wgmma_tests 240 /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaMoeWgmma*:*CudaMoe.*:*CudaMoeReal*:*CudaMoeBlock*:*HeldExpertRuns*'
fi
if want ops; then
    timeout 120 /tmp/g/bench_prefill_ops moe 8192 5 | tee "$out/moe_ops.jsonl" || rc=1
fi
wgmma_table=/tmp/wgmma_table.json
route_ab_table "$wgmma_table" moe_experts.bf16 mma_sync wgmma "${WGMMA_FROM:-1024}"
if want pp; then
    route_ab_interleaved configs/qwen3.6-35b-a3b.json "" mma_sync wgmma "$wgmma_table"
fi
if want serve; then
    for table in builtin "$wgmma_table"; do
        label=$([ "$table" = builtin ] && echo mma_sync || echo wgmma)
        OUT="$out/serve_$label" NINFER_BIN=/tmp/g/ninfer SERVE_FLAGS="--route-table $table" \
            RANDOM_CONCURRENCY=${SERVE_CONCURRENCY:-256:1000} \
            bash tools/gpu/serve_bench.sh random > "$out/serve_$label.txt" 2>&1 || rc=1
        grep -E "random C=" "$out/serve_$label/summary.txt" | sed "s/^/$label /"
    done
fi
exit $rc
