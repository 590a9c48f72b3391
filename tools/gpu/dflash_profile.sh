#!/usr/bin/env bash
# On the device, with a pack of ninfer (tools/gpu/pack_binaries.sh, carry [".deps/gpu.tar.xz"]):
# where a DFlash round's time goes and what the shortlisted proposal head saves, at K = 7,
# batch 1, random true-size drafters (the 27B with DFlash2, the 35B with DFlash) and the demo
# model's shipped DFlash2 drafter:
#   A/B    the full lm_head against --draft-shortlist 131072 (upstream's optimized head size),
#          `ninfer bench -n 128 -r 2`, one line each in $OUT/bench.jsonl;
#   phases NINFER_STEP_PROFILE=1 (every phase synchronised: schedule, propose, forward, verify,
#          observe, commit) of one run each, in $OUT/profiles.log.
# MEMORY_FLAGS: added to every 35B command (an 80 GB card needs "--gpu-memory-utilization 0.97").
#   bash tools/gpu/dflash_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
rc=0
BENCH_REPS=${BENCH_REPS:-2}
source tools/gpu/bench_line.sh # bench_line: one line of $out/bench.jsonl a run
profile() { # label, flags...
    echo "== $1" >> "$out/profiles.log"
    NINFER_STEP_PROFILE=1 timeout 200 /tmp/g/ninfer bench --device cuda -n 64 -p 0 -r 1 \
        --warmup 0 -o json "${@:2}" 2>&1 >/dev/null | grep -v -E "^Loading|%\|" >> "$out/profiles.log" || rc=1
}
m27=(--random-weights --config configs/qwen3.6-27b.json --spec dflash2
     --draft-model configs/dflash/qwen3.8-27b-dflash2.json --draft-tokens 7)
m35=(--random-weights --config configs/qwen3.6-35b-a3b.json ${MEMORY_FLAGS:-} --spec dflash
     --draft-model configs/dflash/qwen3.6-35b-a3b-dflash.json --draft-tokens 7)
demo=(--model models/ninfer-demo --spec dflash2 --draft-tokens 7)
bench_line 27b_dflash2_k7_full "${m27[@]}"
bench_line 27b_dflash2_k7_shortlist "${m27[@]}" --draft-shortlist 131072
bench_line 35b_dflash_k7_full "${m35[@]}"
bench_line 35b_dflash_k7_shortlist "${m35[@]}" --draft-shortlist 131072
profile 27b_dflash2_k7 "${m27[@]}"
profile 35b_dflash_k7 "${m35[@]}"
profile demo_dflash2_k7 "${demo[@]}"
profile demo_plain --model models/ninfer-demo
cat "$out/profiles.log"
exit $rc
