#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): the groupwise W8/Q4 cuda tests (tests/cuda/test_cuda_linear_grouped.cpp)
# first, stopping on a failure; then decode at batch 1 of the random-weight 27B (dense: nearly
# every weight resident) and 35B-A3B in q4 with --group-weights resident against the same
# configs dequantized to bf16, in one run (`ninfer bench`: decode tok/s and the memory-roofline
# share over the resident bytes). Logs and bench.jsonl in $OUT.
#   bash tools/gpu/groupwise_check.sh [tests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
    gate_test grouped_tests 420 /tmp/g/test_cuda_bundle --gtest_brief=1 \
        --gtest_filter='*Grouped*:*CudaLinear*:*CudaFp8*'
fi
source tools/gpu/bench_line.sh
if [ "$what" = bench ] || [ "$what" = all ]; then
    for model in qwen3.6-27b qwen3.6-35b-a3b; do
        bench_line "${model}_q4_resident" --config "configs/$model-q4.json" --random-weights \
            --group-weights resident
        bench_line "${model}_bf16" --config "configs/$model.json" --random-weights
    done
    python3 - "$out/bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    b = j["bench"]
    for r in b["results"]:
        if "decode_roofline_fraction" in r:
            print("%-28s %-40s weights %5.1f GB  decode %6.1f tok/s  %.1f%% of roofline" % (
                j["label"], b["weights"], b["memory_bytes"]["weights"] / 1e9,
                r["decode_tok_s"]["mean"], 100 * r["decode_roofline_fraction"]["mean"]))
PY
fi
exit $rc
