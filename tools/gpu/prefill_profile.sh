#!/usr/bin/env bash
# On the device (after `source tools/gpu/unpack_binaries.sh`, a pack with ninfer): where a
# serving-shaped prefill step's GPU time goes, kernel by kernel. `ninfer bench --batch B -p P
# --max-batch-tokens B*P --prefill-chunk P` prefills B prompts of P tokens in one step of B*P rows
# (the shape `ninfer serve --max-batch-tokens B*P` runs under load); Nsight Compute times every
# kernel of that bench at one and at two repetitions (-r 1, -r 2: the same engine, the same
# start-up profile forward), and the per-kernel difference is one such step with the loading,
# the ceilings and the start-up cancelled out (tools/gpu/ncu_decode_table.py, 1 "token").
# A plain run of the same bench gives the step's wall rate.
#   CONFIGS="configs/qwen3.6-35b-a3b.json ..." BATCH=64 PROMPT=1024 bash tools/gpu/prefill_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-/tmp/g/ninfer}
B=${BATCH:-64}
P=${PROMPT:-1024}
for config in ${CONFIGS:-configs/qwen3.6-35b-a3b.json}; do
    name=$(basename "$config" .json)
    common=(bench --config "$config" --random-weights --device cuda --batch "$B" -n 0
            --prefill-chunk "$P" --max-batch-tokens $((B * P)) --graph-warmup 0 ${BENCH_ARGS:-})
    timeout 240 "$bin" "${common[@]}" -p "$P" -r 3 --warmup 1 -o json > "$out/wall_$name.json" \
        2> "$out/wall_$name.err" || echo "== plain bench of $name failed: $(tail -2 "$out/wall_$name.err")"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print(*[(x['test'], x.get('prefill_tok_s')) for x in r])" \
        "$out/wall_$name.json" 2>/dev/null | tee "$out/wall_$name.txt"
    for r in 1 2; do
        timeout 280 ncu --metrics gpu__time_duration.sum --csv --print-units base \
            --clock-control none --cache-control none --log-file "$out/ncu_${name}_r$r.csv" \
            "$bin" "${common[@]}" -p "$P" -r $r --warmup 0 > /dev/null 2> "$out/ncu_${name}_r$r.err" ||
            echo "== ncu $name r=$r failed: $(tail -3 "$out/ncu_${name}_r$r.err")"
    done
    python3 tools/gpu/ncu_decode_table.py "$out/ncu_${name}_r1.csv" "$out/ncu_${name}_r2.csv" 1 \
        | tee "$out/prefill_profile_$name.txt"
done
