#!/usr/bin/env bash
# On a GPU host (the lent H200): build, run every cuda test, then the MTP speculative figures:
#   - ninfer bench on random-weight Qwen3.6-35B-A3B, batch 1: plain decoding against
#     --spec mtp --draft-tokens K (random weights accept almost nothing, so decode tok/s with
#     speculation is one token per verification round: the verify-cost ratio of issue 15);
#   - bench/spec/bench_mtp.py on the demo model (acceptance and speedup per K) on cuda.
# Logs and JSON go to $OUT (or out/).   bash tools/gpu/spec_check.sh [KS]   (default 1,3)
# NINFER_BIN=/tmp/g/ninfer (after source tools/gpu/unpack_binaries.sh): use that binary, skip the
# build and the tests; SPEC_DEMO=0 skips the demo-model part.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
ks=${1:-1,3}
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
if [ -n "${NINFER_BIN:-}" ]; then # packed binaries (tools/gpu/pack_binaries.sh): no build here
    bin=$NINFER_BIN
else
    TARGETS="ninfer $(ls tests/cuda/test_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')" \
        bash tools/gpu/check.sh tests || exit 1
    bin=./build-gpu/apps/ninfer/ninfer
    export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp:$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
bench() { # label, extra flags
    timeout 240 $bin bench --config configs/qwen3.6-35b-a3b.json --random-weights --device cuda \
        -n 128 -r ${BENCH_REPS:-3} --warmup 1 -o json "${@:2}" > "$out/spec_bench_$1.json" \
        2> "$out/spec_bench_$1.err"
    python3 - "$out/spec_bench_$1.json" "$1" <<'PY' | tee -a "$out/summary.txt"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
for r in j["results"]:
    s = r.get("speculative", {})
    print("35B", sys.argv[2], r["test"], "decode %.1f tok/s" % r["decode_tok_s"]["mean"],
          "step %.3f ms" % (1e3 / r["decode_tok_s"]["mean"] * s.get("tokens_per_round", 1)),
          "tokens/round %.3f" % s.get("tokens_per_round", 1))
PY
}
log "35B verify cost"
bench plain
for k in ${ks//,/ }; do bench k$k --spec mtp --draft-tokens $k; done
[ "${SPEC_DEMO:-1}" = 1 ] && log "demo model MTP on cuda" && timeout 240 python3 bench/spec/bench_mtp.py --ninfer $bin --device cuda --new 256 \
    > "$out/spec_demo_cuda.jsonl" 2> "$out/spec_demo_cuda.err"
[ "${SPEC_DEMO:-1}" = 1 ] && cat "$out/spec_demo_cuda.jsonl" >> "$out/summary.txt"
log "done"
# Only a few files come back from the device: everything but the summary goes into one tarball.
(cd "$out" && tar czf logs.tgz --exclude summary.txt --exclude logs.tgz . && \
    find . -type f ! -name summary.txt ! -name logs.tgz -delete)
