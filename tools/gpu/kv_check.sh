#!/usr/bin/env bash
# On the H200 (after `source tools/gpu/unpack_binaries.sh`): the KV-dtype CUDA tests, the decode
# attention op at bf16 / int8 / fp8 KV (bench_decode_ops' paged_attention lines), then the
# random-weight 35B-A3B decoding at a long context with each --kv-dtype in one run, and the KV
# capacity `ninfer serve` plans with each. Logs and JSON under $OUT.
#   NINFER_BIN=/tmp/g/ninfer bash tools/gpu/kv_check.sh [tests|ops|bench|all]
# env: KV_CONTEXT (default 131072), KV_MODEL (default qwen3.6-35b-a3b), EXTRA_TESTS, KV_CODED_AB
# (1: int8 again with attention_prefill.coded on the coded flash kernel, an A/B of the prefill).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-/tmp/g/ninfer}
what=${1:-all}
source "$(dirname "$0")/gate.sh"
model=${KV_MODEL:-qwen3.6-35b-a3b}
context=${KV_CONTEXT:-131072}
if [ "$what" = tests ] || [ "$what" = all ]; then
    for t in test_cuda_kv_quant test_cuda_attention test_cuda_attention_prep ${EXTRA_TESTS:-}; do
        gate_test $t 300 /tmp/g/$t --gtest_brief=1 # a failure or a missing test stops here
    done
fi
if { [ "$what" = ops ] || [ "$what" = all ]; } && [ -x /tmp/g/bench_decode_ops ]; then
    echo "== bench_decode_ops (paged_attention)"
    timeout 300 /tmp/g/bench_decode_ops 20 > "$out/bench_decode_ops.txt" 2>&1
    echo "exit $?"
    grep -i "attention" "$out/bench_decode_ops.txt" | head -40
fi
{ [ "$what" = tests ] || [ "$what" = ops ]; } && exit 0
for kv in bf16 int8 fp8; do
    echo "== bench $model kv=$kv pg$context,128"
    timeout 240 "$bin" bench --config "configs/$model.json" --random-weights --device cuda \
        --kv-dtype $kv --prefill-chunk 8192 \
        -p 0 -n 0 --pg $context,128 -r 2 --warmup 0 -o json \
        > "$out/bench_${model}_kv_$kv.json" 2> "$out/bench_${model}_kv_$kv.err"
    echo "exit $?"
    python3 "$(dirname "$0")/bench_lines.py" "$out/bench_${model}_kv_$kv.json"
done
# KV_CODED_AB=1: int8 once more with attention_prefill.coded kept on the coded flash kernel, for
# the prefill's A/B against the built-in table (cuDNN over bf16 staging from 512 rows).
if [ "${KV_CODED_AB:-0}" = 1 ]; then
    table=/tmp/kv_check_coded_flash.json
    echo '{"device": {"gpu": "any", "sm_count": 0, "cuda_version": 0}, "decisions":
        {"attention_prefill.coded": {"bands": [{"kernel": "flash"}]}}}' > $table
    echo "== bench $model kv=int8 pg$context,128, attention_prefill.coded on flash"
    timeout 240 "$bin" bench --config "configs/$model.json" --random-weights --device cuda \
        --kv-dtype int8 --prefill-chunk 8192 --route-table $table \
        -p 0 -n 0 --pg $context,128 -r 2 --warmup 0 -o json \
        > "$out/bench_${model}_kv_int8_flash.json" 2> "$out/bench_${model}_kv_int8_flash.err"
    echo "exit $?"
    python3 "$(dirname "$0")/bench_lines.py" "$out/bench_${model}_kv_int8_flash.json"
fi
for kv in bf16 int8 fp8; do
    echo "== serve $model kv=$kv: planned capacity"
    timeout 120 "$bin" serve --config "configs/$model.json" --random-weights --device cuda \
        --kv-dtype $kv --port 8391 > "$out/serve_capacity_$kv.log" 2>&1 &
    pid=$!
    for _ in $(seq 110); do
        grep -q "KV capacity" "$out/serve_capacity_$kv.log" && break
        sleep 1
    done
    grep "KV capacity" "$out/serve_capacity_$kv.log"
    kill $pid 2> /dev/null; wait $pid 2> /dev/null
done
