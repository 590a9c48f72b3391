#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): the groupwise W8/Q4 cuda tests (tests/cuda/test_cuda_linear_grouped.cpp,
# test_cuda_moe_grouped.cpp) and the other MoE and fp8 ones first, stopping on a failure; then
# decode at batch 1 of the random-weight 27B (dense: nearly every weight resident) and 35B-A3B in
# q4 (--group-weights auto: resident on CUDA) against the same configs in bf16, in one run
# (`ninfer bench`: decode tok/s and the memory-roofline share over the resident bytes); then
# prefill (pp512, past the GEMV's 32 rows: dequantize + cuBLAS) the same way. Logs and
# bench.jsonl in $OUT.
#   bash tools/gpu/groupwise_check.sh [tests|bench|prefill|all]
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
        --gtest_filter='*Grouped*:*CudaLinear*:*CudaFp8*:*CudaMoe*'
fi
source tools/gpu/bench_line.sh
if [ "$what" = bench ] || [ "$what" = all ]; then
    for model in qwen3.6-27b qwen3.6-35b-a3b; do
        bench_line "${model}_q4_resident" --config "configs/$model-q4.json" --random-weights
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
if [ "$what" = prefill ] || [ "$what" = all ]; then
    for cfg in qwen3.6-27b-q4 qwen3.6-27b qwen3.6-35b-a3b-q4 qwen3.6-35b-a3b; do
        timeout 200 /tmp/g/ninfer bench --device cuda --config "configs/$cfg.json" \
            --random-weights -p 512 -n 0 -r 3 --warmup 1 -o json > "$out/prefill_$cfg.json" \
            2> "/tmp/prefill_$cfg.err" || { rc=1; tail -3 "/tmp/prefill_$cfg.err"; }
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [print(sys.argv[2], r['test'], \
'prefill %.0f tok/s' % r['prefill_tok_s']['mean']) for r in j['results'] if 'prefill_tok_s' in r]" \
            "$out/prefill_$cfg.json" "$cfg" || true
    done
fi
exit $rc
