#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): every cuda test, then the routes of the other GPUs of the fat binary,
# then the 35B benchmark natively and in portable mode, in one run. Logs and JSON go to $OUT.
#   bash tools/gpu/bundle_check.sh [tests|portable|bench|all]   (default all)
#   SHARDS=4: the bundle runs as that many gtest shards side by side (one GPU; tests are small).
# Exits non-zero when a test fails (a failing native test stops what follows) or a bench fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
case "$what" in tests|portable|bench|all) ;; *) echo "usage: bundle_check.sh [tests|portable|bench|all]"; exit 2;; esac
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz # (not this script's own $1)
source tools/gpu/gate.sh
bundle=/tmp/g/test_cuda_bundle
shards=${SHARDS:-4}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# The bundle in `shards` processes at once; fails when any shard fails or none ran a test.
run_sharded() {
    local name=$1 limit=$2
    shift 2
    local pids=() rc=0
    for ((i = 0; i < shards; ++i)); do
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" "$@" --gtest_brief=1 \
            > "$out/${name}_$i.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cat "$out/${name}"_*.log > "$out/$name.log"
    grep -hE "^\[  (PASSED|FAILED)|FAILED TEST|tests? ran" "$out/$name.log" | sort | uniq -c
    grep -q "PASSED" "$out/$name.log" || rc=1
    [ $rc -eq 0 ] && echo "== $name passed" || echo "== FAILED $name (logs $out/${name}_*.log)"
    return $rc
}

if [ "$what" = tests ] || [ "$what" = all ]; then
    [ -x "$bundle" ] || { echo "== FAILED: $bundle is not packed"; exit 1; }
    run_sharded cuda_bundle 500 "$bundle" || exit 1
fi

if [ "$what" = portable ] || [ "$what" = all ]; then
    # The model-level tests with every route as the least capable GPU of the build takes it
    # (ops/cuda/device_caps.h): HF parity, serving exactness, MTP, fp8 and vision end to end.
    filter='PortableRoutes.*:Fixtures/CudaFixtures.*:Fixtures/CudaFp8Fixtures.*:Fixtures/CudaMtp.*:Fixtures/CudaVision.*'
    NINFER_PORTABLE_KERNELS=1 run_sharded cuda_portable 400 "$bundle" --gtest_filter="$filter" ||
        exit 1
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
    for mode in native portable; do
        portable=0
        [ $mode = portable ] && portable=1
        gate_step "bench $mode" env NINFER_PORTABLE_KERNELS=$portable timeout 300 /tmp/g/ninfer bench \
            --config configs/qwen3.6-35b-a3b.json --random-weights --device cuda -p 8192 -n 128 \
            --pg 2048,384 -r ${BENCH_REPS:-3} --warmup 1 --prefill-chunk 8192 -o json \
            > "$out/bench_35b_$mode.json" 2> "$out/bench_35b_$mode.err"
        python3 - "$out/bench_35b_$mode.json" "$mode" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
print(sys.argv[2], j["model"], "copy %.0f GB/s gemm %.0f TFLOP/s" % (
    j["ceilings"]["copy_bytes_per_s"] / 1e9, j["ceilings"]["gemm_flops"] / 1e12))
for r in j["results"]:
    s = r["test"]
    if "prefill_tok_s" in r: s += " prefill %.0f tok/s (%.1f TFLOP/s)" % (r["prefill_tok_s"]["mean"], r["prefill_tflops"]["mean"])
    if "decode_tok_s" in r: s += " decode %.1f tok/s (%.1f%% roofline)" % (r["decode_tok_s"]["mean"], 100 * r["decode_roofline_fraction"]["mean"])
    print(" ", sys.argv[2], s)
PY
    done
fi
gate_finish
