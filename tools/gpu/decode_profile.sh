#!/usr/bin/env bash
# On the device (after `source tools/gpu/unpack_binaries.sh`, a pack with ninfer): where one
# batch-1 decode token's GPU time goes, kernel by kernel. Nsight Compute (ncu; Nsight Systems is
# not on the image) times every kernel node of the decode graphs in isolation, at the card's own
# clocks, over two `ninfer bench` decodes of N1 and N2 tokens; the difference of the two, per
# kernel name, divided by N2 - N1 is one token's cost with the loading, prefill and graph
# capture cancelled out. A plain `ninfer bench` of the same config gives the token's wall time,
# so the table also says how much of it no kernel accounts for (launch gaps, PDL waits).
#   CONFIGS="configs/qwen3.6-35b-a3b-fp8.json ..." bash tools/gpu/decode_profile.sh
# Tables and the raw CSV in $OUT (tools/gpu/ncu_decode_table.py makes the table).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-/tmp/g/ninfer}
n1=${N1:-4}
n2=${N2:-12}
for config in ${CONFIGS:-configs/qwen3.6-35b-a3b-fp8.json}; do
    name=$(basename "$config" .json)
    common=(bench --config "$config" --random-weights --device cuda ${BENCH_ARGS:-})
    timeout 240 "$bin" "${common[@]}" -n 128 -r 3 --warmup 1 -o json > "$out/wall_$name.json" \
        2> "$out/wall_$name.err" || echo "== plain bench of $name failed: $(tail -2 "$out/wall_$name.err")"
    for n in $n1 $n2; do
        # One metric (a single pass: no replay), clocks and caches left as they run.
        timeout 280 ncu --graph-profiling node --metrics gpu__time_duration.sum --csv \
            --print-units base --clock-control none --cache-control none \
            --log-file "$out/ncu_${name}_n$n.csv" \
            "$bin" "${common[@]}" -n "$n" -r 1 --warmup 0 > /dev/null 2> "$out/ncu_${name}_n$n.err" ||
            echo "== ncu $name n=$n failed: $(tail -3 "$out/ncu_${name}_n$n.err")"
    done
    python3 tools/gpu/ncu_decode_table.py "$out/ncu_${name}_n$n1.csv" "$out/ncu_${name}_n$n2.csv" \
        $((n2 - n1)) --wall "$out/wall_$name.json" | tee "$out/decode_profile_$name.txt"
done
