#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer built with NCCL
# (NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer test_cuda_bundle; carry
# [".deps/gpu.tar.xz"]): the tensor-parallel cuda tests (tests/cuda/test_cuda_tensor_parallel.cpp:
# two streams of one GPU, and two GPUs where the machine has them), stopping on a failure; then
# decode at batch 1 and 8 concurrent, one GPU against --tensor-parallel 2 in one run, for the 27B
# (dense) and the 35B-A3B with random weights: on one GPU as cuda:0,cuda:0 (the host-staged
# collective: a correctness run, not a speed), on two as cuda:0,cuda:1 with NCCL.
#   bash tools/gpu/tp_check.sh [tests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
rc=0
gpus=$(nvidia-smi -L | wc -l)
echo "GPUs: $gpus" | tee -a "$out/summary.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
    gate_test tp_tests 500 /tmp/g/test_cuda_bundle --gtest_filter='*CudaTensorParallel*'
fi
source tools/gpu/bench_line.sh
if [ "$what" = bench ] || [ "$what" = all ]; then
    if [ "$gpus" -ge 2 ]; then tp=(--tensor-parallel 2 --devices cuda:0,cuda:1); else
        tp=(--tensor-parallel 2 --devices cuda:0,cuda:0 --collective host); fi
    for model in qwen3.6-27b qwen3.6-35b-a3b; do
        bench_line "${model}_tp1" --config "configs/$model.json" --random-weights
        bench_line "${model}_tp2" --config "configs/$model.json" --random-weights "${tp[@]}"
    done
fi
exit $rc
