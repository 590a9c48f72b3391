#!/usr/bin/env bash
# On the device, after `source tools/gpu/unpack_binaries.sh` (a pack of ninfer and
# test_cuda_bundle): hunts the non-finite logits of the bf16 35B served at --max-batch-tokens
# 65536 (H200, 2026-12-07: 801 of 1,000 1k/128 requests stopped; the fp8 35B served every one at
# the same budget, the bf16 35B every one at 8,192).
#   1. the full-budget op tests: the 35B's experts at 65,536 tokens through both bf16 grouped
#      routes, and its bf16 projections at 65,536 rows (finite outputs, sampled rows against FP64);
#   2. `ninfer serve` (bf16 35B, random weights, 1k/128, 256 concurrent, 1,000 prompts) at budgets
#      16,384, 32,768 and 65,536, then 65,536 with the bf16 MoE forced to mma_sync and with
#      NINFER_PDL=0: each run's completed/failed count and its first errors (serve_bench.sh's summary) in
#      $OUT/summary.txt.
#   bash tools/gpu/budget_check.sh [tests|serve]...   (default both; each part fits a 600 s command
#   on its own, both together may not: run them as two commands on a warm machine)
#   LAYERS=N serves the 35B's first N layers (same per-layer shapes; 20 fit an H100 with room
#   for a 65,536-row step). Each serve run's start-up line (KV capacity, step scratch) goes to
#   the summary too.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-/tmp/g/ninfer}
parts=${*:-tests serve}
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
config=configs/qwen3.6-35b-a3b.json
if [ -n "${LAYERS:-}" ]; then
    python3 - "$config" "$LAYERS" /tmp/budget_check_config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
t = c.get("text_config", c)
t["num_hidden_layers"] = int(sys.argv[2])
t["layer_types"] = t["layer_types"][: int(sys.argv[2])]
json.dump(c, open(sys.argv[3], "w"))
PY
    config=/tmp/budget_check_config.json
fi

if [[ " $parts " == *" tests "* ]]; then
    log "full-budget op tests"
    timeout 300 /tmp/g/test_cuda_bundle \
        --gtest_filter='CudaMoeWgmma.Qwen35bExpertsAtAFullBudgetStep:CudaLinear.Qwen35bProjectionsAtAFullBudgetStep' \
        2>&1 | grep -E "^\[ +(OK|FAILED|PASSED) |Failure|non-finite|rows from|Which is" |
        tee -a "$out/summary.txt"
fi

serve_once() { # name, budget, chunk, [env assignments...]
    local name=$1 budget=$2 chunk=$3
    shift 3
    log "serve bf16 $name: budget $budget, chunk $chunk${LAYERS:+, $LAYERS layers}${*:+, $*}"
    env "$@" NINFER_BIN="$bin" CONFIG="$config" \
        SERVE_FLAGS="--gdn-state-dtype bf16 --max-queue 1024 ${EXTRA_FLAGS:-}" \
        MAX_BATCH_TOKENS=$budget PREFILL_CHUNK=$chunk RANDOM_CONCURRENCY=256:1000 \
        BENCH_TIMEOUT=150 OUT="$out/$name" timeout 240 bash tools/gpu/serve_bench.sh random |
        grep -E "C=256|failed:|did not start" | tee -a "$out/summary.txt"
    grep -h "KV capacity" "$out/$name"/*.log 2>/dev/null | head -1 | tee -a "$out/summary.txt"
}

if [[ " $parts " == *" serve "* ]]; then
    serve_once b64k 65536 4096 # the failing one first, then what tells its cause apart
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    # An explicit table file is taken as it is (no device match): only the MoE decision differs.
    printf '{"device": {"gpu": "%s", "sm_count": 0, "cuda_version": 0}, "decisions": {"moe_experts.bf16": {"bands": [{"kernel": "mma_sync"}]}}}\n' \
        "$gpu" > /tmp/moe_mma_sync.json
    EXTRA_FLAGS="--route-table /tmp/moe_mma_sync.json" serve_once b64k_mma_sync 65536 4096
    serve_once b64k_nopdl 65536 4096 NINFER_PDL=0
    serve_once b32k 32768 2048
    serve_once b16k 16384 2048
fi
log "done"
