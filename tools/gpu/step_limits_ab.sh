#!/usr/bin/env bash
# On the device, with a pack holding ninfer (tools/gpu/pack_binaries.sh; carry
# [".deps/gpu.tar.xz"]): the serving step limits A/B. 1k/128 random prompts at CONCURRENCY
# (default 256, 1,000 prompts) against `ninfer serve` on CONFIG's random weights with each
# PREFILL_CHUNK/MAX_BATCH_TOKENS pair of LIMITS in turn (default: the CPU's 512/2048, CUDA's
# 512/8192 (set from this script's first run: bench/NOTES.md), serve_bench.sh's 2048/8192 and
# 4096/16384), one server each, so the defaults can be set from a measurement. The prefix cache's snapshot stride follows the chunk
# (engine.cpp), which is the other side of the trade.
#   CONFIG=configs/qwen3.6-35b-a3b-fp8.json bash tools/gpu/step_limits_ab.sh     JSON in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz > /dev/null
rc=0
for limits in ${LIMITS:-512/2048 512/8192 2048/8192 4096/16384}; do
    chunk=${limits%/*} budget=${limits#*/}
    label="chunk${chunk}_budget${budget}"
    OUT="$out/$label" NINFER_BIN=/tmp/g/ninfer CONFIG=${CONFIG:-configs/qwen3.6-35b-a3b-fp8.json} \
        PREFILL_CHUNK=$chunk MAX_BATCH_TOKENS=$budget SERVE_FLAGS="${SERVE_FLAGS:-}" \
        RANDOM_CONCURRENCY=${CONCURRENCY:-256}:${PROMPTS:-1000} \
        bash tools/gpu/serve_bench.sh random > "$out/$label.txt" 2>&1 || rc=1
    grep -E "random C=" "$out/$label/summary.txt" | sed "s/^/$label /"
    rm -f "$out/$label/serve_random.log" # the server log: large, and in summary.txt in short
done
exit $rc
