#!/usr/bin/env bash
# On the device: two builds of ninfer A/B on the same random-weight models, interleaved in one
# run (route_ab.sh A/Bs route tables of one build; this, two builds): batch-1 decode and, with
# BATCHES, `ninfer bench --batch B` decode. OLD is the earlier build (a pack of its ninfer alone:
#   tar cf - -C .deps/gpu ninfer | xz -9e -T0 > .deps/old_ninfer.tar.xz, then on the device
#   mkdir -p /tmp/old && tar xJf .deps/old_ninfer.tar.xz -C /tmp/old),
# NEW the current one (/tmp/g/ninfer after unpack_binaries.sh, whose libraries both use).
#   OLD=/tmp/old/ninfer NEW=/tmp/g/ninfer CONFIGS="configs/qwen3.6-35b-a3b-fp8.json ..." \
#       [ROUNDS=2] [BENCH_ARGS="-n 128 -r 3"] [NEW_ARGS="..."] bash tools/gpu/binary_ab.sh
# NEW_ARGS go to the new build alone (a new option), NEW_ENV (VAR=VALUE ...) to its environment
# (an opt-in switch: OLD and NEW may then be the same binary). Results: $OUT/binary_ab.jsonl
# ({"label", "config", "round", "bench"}) and one line per run on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
old=${OLD:?OLD: the earlier ninfer}
new=${NEW:-/tmp/g/ninfer}
for config in ${CONFIGS:-configs/qwen3.6-35b-a3b-fp8.json}; do
    for round in $(seq 1 "${ROUNDS:-2}"); do
        for label in old new; do
            bin=$old extra="" environment=""
            [ $label = new ] && bin=$new extra=${NEW_ARGS:-} environment=${NEW_ENV:-}
            json=/tmp/binary_ab_$label.json
            if ! env $environment timeout 300 "$bin" bench --config "$config" --random-weights --device cuda \
                ${BENCH_ARGS:--n 128 -r 3} --warmup 1 $extra -o json > "$json" 2> /tmp/binary_ab.err; then
                echo "== $label $config failed: $(tail -2 /tmp/binary_ab.err)"
                continue
            fi
            python3 -c 'import json, sys; print(json.dumps({"label": sys.argv[1], "config": sys.argv[2],
                "round": int(sys.argv[3]), "bench": json.load(open(sys.argv[4]))}))' \
                "$label" "$config" "$round" "$json" >> "$out/binary_ab.jsonl"
            python3 "$(dirname "$0")/bench_lines.py" "$json" --label "$label $(basename "$config") round $round"
        done
    done
done
