#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): the DFlash cuda tests, then every other cuda test, then the DFlash
# figures: round cost at K = 7 with random true-size drafters against one plain decode step
# (the 35B with DFlash, the 27B with DFlash2; batch 1, `ninfer bench`), and the demo model's
# speed with its DFlash2 drafter against MTP and plain decoding (bench/spec/bench_mtp.py).
#   bash tools/gpu/dflash_check.sh [tests|bench|demo|batch8|all]     logs and JSON in $OUT
# BUNDLE_EXCLUDE: more gtest patterns to leave out of the rest of the bundle (":A:B"), e.g. the
# suites whose fixtures tools/gpu/slim_carry.sh kept off the device (":*CudaVision.*").
# MEMORY_FLAGS: added to every bench and serve (the 35B with a drafter needs
# "--gpu-memory-utilization 0.97" on an 80 GB card).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
bundle=/tmp/g/test_cuda_bundle
rc=0
filter='*DFlash*:*Dflash*:*SpanAttention*:*GroupedDynamicConv*'
# The DFlash tests and 4 shards of the rest run side by side (SHARD_TIMEOUT s each, default 420),
# each logging every test line-buffered, so that a shard that crashes or times out names the
# test it was in (its last "[ RUN      ]" line).
if [ "$what" = tests ] || [ "$what" = all ]; then
    timeout ${SHARD_TIMEOUT:-420} stdbuf -oL -eL $bundle --gtest_filter="$filter" \
        > "$out/dflash_tests.log" 2>&1 &
    pids=($!)
    for i in 0 1 2 3; do
        GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${SHARD_TIMEOUT:-420} stdbuf -oL -eL \
            $bundle --gtest_filter="-$filter${BUNDLE_EXCLUDE:-}" > "$out/bundle_$i.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    for log in "$out/dflash_tests.log" "$out"/bundle_*.log; do
        echo "== $(basename "$log"): $(grep -c '^\[       OK' "$log") passed"
        grep -E "^\[  FAILED  \].*\(|^\[==========\].* ran" "$log" | head -20
        # A shard that did not finish: the test it was in.
        grep -qE "^\[==========\].* ran" "$log" ||
            echo "   did not finish; last test: $(grep '^\[ RUN' "$log" | tail -1)"
    done
fi
source tools/gpu/bench_line.sh
bench() { # label, config, extra flags: a random-weight config (tools/gpu/bench_line.sh)
    bench_line "$1" --config "$2" --random-weights ${MEMORY_FLAGS:-} "${@:3}"
}
# The figures' four setups: FN LABEL CONFIG FLAGS... for each (FN: bench or serve8).
each_setup() {
    "$1" 35b_plain configs/qwen3.6-35b-a3b.json
    "$1" 35b_dflash_k7 configs/qwen3.6-35b-a3b.json --spec dflash \
        --draft-model configs/dflash/qwen3.6-35b-a3b-dflash.json --draft-tokens 7
    "$1" 27b_plain configs/qwen3.6-27b.json
    "$1" 27b_dflash2_k7 configs/qwen3.6-27b.json --spec dflash2 \
        --draft-model configs/dflash/qwen3.8-27b-dflash2.json --draft-tokens 7
}
if [ "$what" = bench ] || [ "$what" = all ]; then
    each_setup bench
fi
if [ "$what" = demo ] || [ "$what" = all ]; then
    timeout 150 python3 bench/spec/bench_mtp.py --ninfer /tmp/g/ninfer --device cuda --new 256 \
        --reps 2 --spec mtp,dflash2 --ks 3,7 > "$out/demo_spec.jsonl" 2> "$out/demo_spec.err" || rc=1
    cat "$out/demo_spec.jsonl"
fi
# Batch 8 (served, 8 concurrent 128/256 requests, greedy): random drafters accept almost
# nothing, so each stream's tok/s is one token a round; a server is skipped once the script
# has run SERVE_DEADLINE s (default 420).
serve8() { # label, config, serve flags...
    [ $SECONDS -gt ${SERVE_DEADLINE:-420} ] && { echo "$1: skipped (time)"; return; }
    local port=8331
    timeout 150 /tmp/g/ninfer serve --port $port --device cuda --no-log-requests --random-weights \
        --config "$2" --tokenizer models/ninfer-demo --max-sequences 8 \
        ${MEMORY_FLAGS:-} "${@:3}" > "/tmp/serve8_$1.log" 2>&1 &
    local pid=$!
    timeout 140 python3 bench/serve/bench_serve.py --base-url http://127.0.0.1:$port \
        --wait-for-server 100 --workload random --input-len 128 --output-len 256 \
        --concurrency 8 --num-prompts 8 --warmup 8 --quiet -o "$out/serve8_$1.json" || rc=1
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
    [ -s "$out/serve8_$1.json" ] || tail -4 "/tmp/serve8_$1.log" # why the server did not answer
    python3 - "$out/serve8_$1.json" "$1" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
r = j["runs"][-1] if "runs" in j else j
print(sys.argv[2], "batch 8:", json.dumps({k: r.get(k) for k in ("output_throughput", "mean_tpot_ms", "median_tpot_ms")}))
PY
}
if [ "$what" = all ] || [ "$what" = batch8 ]; then
    each_setup serve8
fi
exit $rc
