#!/usr/bin/env bash
# On the device, with a pack of ninfer and test_cuda_bundle (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): the drafter graphs' CUDA tests and their A/B, one binary, the arm picked
# by NINFER_DRAFT_GRAPHS (docs/SPECULATIVE.md):
#   tests  the speculative suites (MTP, DFlash, their acceptance gates and graph tests);
#   demo   bench/spec/bench_mtp.py on the demo model: MTP with the alignment eager (chain) and
#          graphed (chain,observe), DFlash2 with the proposal eager (none) and graphed (dflash);
#   big    ninfer bench, random weights, batch 1: the 35B (bf16, fp8) MTP K = 3 round with the
#          alignment eager and graphed, the 27B DFlash2 K = 7 round with the proposal eager and
#          graphed, and the plain steps (on an 80 GB card the bf16 35B needs the 0.97 below).
#   bash tools/gpu/spec_graphs_check.sh [tests|demo|big]...      logs and JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
parts=${*:-tests demo big}
want() { [[ " $parts " == *" $1 "* ]]; }
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
t0=$(date +%s)
log() { echo "== $(( $(date +%s) - t0 )) s $*" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
rc=0
source tools/gpu/bench_line.sh
big() { # label, NINFER_DRAFT_GRAPHS, ninfer bench flags... (one line of $out/bench.jsonl each)
    # Not a pipe: bench_line sets rc in this shell.
    NINFER_DRAFT_GRAPHS=$2 BENCH_REPS=2 bench_line "$1" --random-weights \
        --gpu-memory-utilization 0.97 "${@:3}" > >(tee -a "$out/summary.txt")
}
demo() { # label, NINFER_DRAFT_GRAPHS, bench_mtp.py flags...
    NINFER_DRAFT_GRAPHS=$2 timeout 150 python3 bench/spec/bench_mtp.py --ninfer /tmp/g/ninfer \
        --device cuda --new 256 --reps 2 "${@:3}" > "$out/demo_$1.jsonl" 2> "$out/demo_$1.err" || rc=1
    python3 - "$out/demo_$1.jsonl" "$1" <<'PY' | tee -a "$out/summary.txt"
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    print(sys.argv[2], j["prompt"], j["setting"], j["decode_tok_s"], "%.3fx" % j["speedup"],
          "same tokens" if j["same_tokens_as_plain"] else "TOKENS DIFFER")
PY
}
if want tests; then
    log "tests"
    timeout ${TEST_S:-420} /tmp/g/test_cuda_bundle \
        --gtest_filter='*CudaMtp*:*CudaDFlash*:*CudaDflash*:*CudaSpeculative*' \
        > "$out/tests.txt" 2>&1 || rc=1
    grep -E "^\[  (PASSED|FAILED) |tests ran" "$out/tests.txt" | tee -a "$out/summary.txt"
fi
if want demo; then
    log "demo"
    demo mtp_eager_observe chain --ks 1,2,3,4
    demo mtp_observe_graphs chain,observe --ks 1,2,3,4
    demo dflash2_eager none --spec dflash2 --ks 3,7
    demo dflash2_graphs dflash --spec dflash2 --ks 3,7
fi
if want big; then
    log "big"
    D="--spec dflash2 --draft-model configs/dflash/qwen3.8-27b-dflash2.json --draft-tokens 7"
    for cfg in qwen3.6-35b-a3b qwen3.6-35b-a3b-fp8; do
        big ${cfg}_plain none --config configs/$cfg.json
        big ${cfg}_k3_eager_observe chain --config configs/$cfg.json --spec mtp --draft-tokens 3
        big ${cfg}_k3_observe_graphs chain,observe --config configs/$cfg.json --spec mtp --draft-tokens 3
    done
    big 27b_plain none --config configs/qwen3.6-27b.json
    big 27b_dflash2_eager chain,observe --config configs/qwen3.6-27b.json $D
    big 27b_dflash2_graphs chain,observe,dflash --config configs/qwen3.6-27b.json $D
fi
log "done (rc $rc)"
exit $rc
