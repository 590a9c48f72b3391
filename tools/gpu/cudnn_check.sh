#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle, bench_prefill_ops and ninfer
# (NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer test_cuda_bundle
# bench_prefill_ops; carry [".deps/gpu.tar.xz"]): cuDNN's fused attention as paged_attention's
# prefill route (src/ops/cuda/attention_cudnn.cpp), libcudnn from the image's torch.
#   tests: which cuDNN loads, then the prefill-attention suites on both kernels, the sabotage arm
#          and the route-table suite, stopping on a failure;
#   ops:   bench_prefill_ops attention (each kernel of attention_prefill.bf16 forced, one run);
#   pp:    the 35B's (and with MODELS="35b 27b" the 27B's) prefill at 2,048 and 8,192 rows with
#          the built-in table (cudnn from 512 rows) and with a table keeping attention_prefill.bf16
#          on flash, twice each, interleaved (PP_FLAGS: more `ninfer bench` flags).
#   bash tools/gpu/cudnn_check.sh [tests|ops|pp|all]...      logs and JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/route_ab.sh "$@"
if want tests; then
    /tmp/g/ninfer info --device cuda --config configs/qwen3.6-35b-a3b.json | grep -E "route|cudnn"
    gate_test cudnn_tests 300 /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaPrefillAttention*:*CudaRouteTable*:*CudaKvQuant*'
fi
if want ops; then
    timeout 180 /tmp/g/bench_prefill_ops attention 8192 5 | tee "$out/attention_ops.jsonl" || rc=1
fi
flash_table=/tmp/flash_table.json
route_ab_table "$flash_table" attention_prefill.bf16 flash cudnn "$route_ab_never"
if want pp; then
    for model in ${MODELS:-35b}; do
        config=configs/qwen3.6-35b-a3b.json
        [ "$model" = 27b ] && config=configs/qwen3.6-27b.json
        route_ab_interleaved "$config" "$model " cudnn flash "$flash_table"
    done
fi
exit $rc
