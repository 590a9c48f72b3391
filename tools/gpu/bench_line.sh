# Sourced by the GPU scripts (dflash_check.sh, dflash_profile.sh): bench_line LABEL FLAGS...
# runs `/tmp/g/ninfer bench --device cuda -n 128 -p 0 -r $BENCH_REPS --warmup 1 -o json FLAGS`,
# appends {"label", "bench"} as one line of $out/bench.jsonl (the device returns 8 files at
# most) and prints each result's decode tok/s, round time and tokens a round. A failing bench
# prints the end of its stderr and sets rc=1. Needs $out and rc in the caller.
bench_line() { # label, flags...
    timeout 200 /tmp/g/ninfer bench --device cuda -n 128 -p 0 -r "${BENCH_REPS:-3}" --warmup 1 \
        -o json "${@:2}" > "/tmp/bench_$1.json" 2> "/tmp/bench_$1.err" ||
        { rc=1; tail -3 "/tmp/bench_$1.err"; }
    python3 - "/tmp/bench_$1.json" "$1" "$out/bench.jsonl" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
with open(sys.argv[3], "a") as f:
    f.write(json.dumps({"label": sys.argv[2], "bench": j}) + "\n")
for r in j["results"]:
    tps = r["decode_tok_s"]["mean"]
    tpr = r.get("speculative", {}).get("tokens_per_round", 1)
    print(sys.argv[2], r["test"], "decode %.1f tok/s, round %.3f ms, tokens/round %.3f"
          % (tps, 1e3 / tps * tpr, tpr))
PY
}
