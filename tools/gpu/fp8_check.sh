#!/usr/bin/env bash
# On the H200 (after `source tools/gpu/unpack_binaries.sh`): the fp8 CUDA tests, then decode of
# the random-weight 35B-A3B (and 27B) with resident fp8 weights against the same config with
# --fp8-weights dequantize (bf16) in one run. Logs and JSON under $OUT.
# `ops` (and `all`) also runs bench_fp8_ops, the fp8 routes against bf16 at the op level.
#   NINFER_BIN=/tmp/g/ninfer bash tools/gpu/fp8_check.sh [tests|ops|bench|all]
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-/tmp/g/ninfer}
what=${1:-all}
source "$(dirname "$0")/gate.sh"
if [ "$what" = tests ] || [ "$what" = all ]; then
    for t in test_cuda_linear_fp8 test_cuda_moe_fp8 test_cuda_fp8_model ${EXTRA_TESTS:-}; do
        gate_test $t 240 /tmp/g/$t --gtest_brief=1 # a failure or a missing test stops here
    done
fi
if { [ "$what" = ops ] || [ "$what" = all ]; } && [ -x /tmp/g/bench_fp8_ops ]; then
    echo "== bench_fp8_ops"
    timeout 300 /tmp/g/bench_fp8_ops ${FP8_OPS_REPS:-10} > "$out/bench_fp8_ops.jsonl" 2> "$out/bench_fp8_ops.err"
    echo "exit $?"
    python3 - "$out/bench_fp8_ops.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except Exception:
        continue
    print("  %-70s %9.4f ms %7.1f TFLOP/s" % (j["op"], j["ms"], j["tflops"]))
PY
fi
{ [ "$what" = tests ] || [ "$what" = ops ]; } && exit 0
for model in ${FP8_MODELS:-qwen3.6-35b-a3b}; do
    for mode in auto dequantize; do
        echo "== bench $model fp8_weights=$mode"
        timeout 200 "$bin" bench --config "configs/$model-fp8.json" --random-weights --device cuda \
            --fp8-weights $mode -p 512 -n 128 -r 3 --warmup 1 -o json \
            > "$out/bench_${model}_fp8_$mode.json" 2> "$out/bench_${model}_fp8_$mode.err"
        echo "exit $?"
        python3 "$(dirname "$0")/bench_lines.py" "$out/bench_${model}_fp8_$mode.json"
    done
done
