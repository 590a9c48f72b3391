#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer built with NCCL
# (NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer test_cuda_bundle; carry
# [".deps/gpu.tar.xz"]): the tensor-parallel cuda tests (tests/cuda/test_cuda_tensor_parallel.cpp:
# two streams of one GPU, and two GPUs where the machine has them), stopping on a failure; then
# decode at batch 1 and 8 concurrent, one GPU against --tensor-parallel 2 in one run, for the 27B
# (dense) and the 35B-A3B with random weights, TP=2 with the host-staged collective (eager; the
# device one is refused until CudaDeviceCollective passes, NCCL takes two GPUs): on one GPU as cuda:0,cuda:0 (two ranks sharing one GPU: what TP
# costs, not what it gains), on two as cuda:0,cuda:1 (NCCL where built); the 35B also with
# --expert-parallel (whole experts a rank). The tests include every moe_block route's held-expert
# runs (*HeldExpertRuns*).
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
    gate_test tp_tests 500 /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaTensorParallel*:*CudaDeviceCollective*:*HeldExpertRuns*'
fi
source tools/gpu/bench_line.sh
if [ "$what" = bench ] || [ "$what" = all ]; then
    if [ "$gpus" -ge 2 ]; then devs=cuda:0,cuda:1; collectives="auto host"; else
        devs=cuda:0,cuda:0; collectives="host"; fi
    for model in qwen3.6-27b qwen3.6-35b-a3b; do
        bench_line "${model}_tp1" --config "configs/$model.json" --random-weights
        for c in $collectives; do
            bench_line "${model}_tp2_$c" --config "configs/$model.json" --random-weights \
                --tensor-parallel 2 --devices "$devs" --collective "$c"
        done
    done
    bench_line qwen3.6-35b-a3b_tp2_ep --config configs/qwen3.6-35b-a3b.json \
        --random-weights --tensor-parallel 2 --devices "$devs" --expert-parallel
fi
exit $rc
