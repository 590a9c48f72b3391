#!/usr/bin/env bash
# On a GPU host: `auto` speculation against none, in one run. Builds ninfer (tools/gpu/check.sh),
# then: the demo model (bench/spec/bench_mtp.py, cuda), random-weight Qwen3.6-35B-A3B at batch 1
# (ninfer bench -n 128, plain and --spec mtp), and the serving benchmark's decode-heavy workload
# at 64 concurrent (tools/gpu/serve_bench.sh decode) without and with --spec mtp. Summary and a
# tarball of the logs in $OUT.   PARTS="demo batch1 serve" (default: all three)
# NINFER_BIN=/tmp/g/ninfer (after source tools/gpu/unpack_binaries.sh): that binary, no build.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
if [ -n "${NINFER_BIN:-}" ]; then # packed binaries (tools/gpu/pack_binaries.sh): no build here
    bin=$NINFER_BIN
else
    TARGETS=ninfer bash tools/gpu/check.sh build > /dev/null || exit 1
    bin=./build-gpu/apps/ninfer/ninfer
    export NINFER_BIN=$bin
    export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp:$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
parts=" ${PARTS:-demo batch1 serve} "
if [[ $parts == *" demo "* ]]; then
log "demo model, cuda"
timeout 200 python3 bench/spec/bench_mtp.py --ninfer $bin --device cuda --new 256 --ks 2 --reps 2 \
    | tee "$out/spec_demo_cuda.jsonl" | tee -a "$out/summary.txt" > /dev/null
fi
[[ $parts == *" batch1 "* ]] && for spec in plain auto; do
    flags=""; [ $spec = auto ] && flags="--spec mtp"
    timeout 200 $bin bench --config configs/qwen3.6-35b-a3b.json --random-weights --device cuda \
        -n 128 -r 3 --warmup 1 -o json $flags > "$out/bench35_$spec.json" 2>> "$out/bench35.err"
    python3 - "$out/bench35_$spec.json" $spec <<'PY' | tee -a "$out/summary.txt"
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["results"]:
    if "decode_tok_s" in r:
        print("35B batch 1", sys.argv[2], r["test"], "decode %.1f tok/s" % r["decode_tok_s"]["mean"],
              "rounds", r.get("speculative", {}).get("rounds"))
PY
done
[[ $parts == *" serve "* ]] && for spec in plain auto; do
    flags=""; [ $spec = auto ] && flags="--spec mtp"
    mkdir -p "$out/serve_$spec"
    OUT="$out/serve_$spec" DECODE_CONCURRENCY="64:64" SERVE_FLAGS="$flags" BENCH_TIMEOUT=200 \
        bash tools/gpu/serve_bench.sh decode > /dev/null 2>&1
    sed "s/^/serve $spec: /" "$out/serve_$spec/summary.txt" | tee -a "$out/summary.txt"
done
log "done"
(cd "$out" && tar czf logs.tgz --exclude summary.txt --exclude logs.tgz . && \
    find . -mindepth 1 ! -name summary.txt ! -name logs.tgz -delete) 2>/dev/null
