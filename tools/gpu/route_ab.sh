# Sourced first by the route A/B scripts (wgmma_check.sh, cudnn_check.sh, w8a8_check.sh), from
# the checkout's root, with the script's arguments: `out` ($OUT, else out/), `parts` (the
# arguments, else all) and `want PART`, the pack unpacked (unpack_binaries.sh), gate.sh's steps,
# and rc=0. Then:
#   route_ab_table PATH DECISION SMALL_KERNEL BIG_KERNEL FROM
#       writes a route-table file: the built-in bands, DECISION giving SMALL_KERNEL its values
#       below FROM and BIG_KERNEL the rest;
#   route_ab_pp CONFIG LABEL TABLE
#       runs `/tmp/g/ninfer bench` on CONFIG's random weights, prefill at 2,048 and 8,192 rows
#       (`--prefill-chunk 8192`, 3 repetitions) with TABLE (a file, or builtin), appends
#       {"label", "bench"} to $out/pp.jsonl and prints each result's tok/s ($PP_FLAGS: more
#       `ninfer bench` flags, e.g. "--kv-dtype int8"). A failing bench
#       prints the end of its stderr (and any cuDNN line) and sets rc=1;
#   route_ab_interleaved CONFIG PREFIX BUILTIN_LABEL TABLE_LABEL TABLE
#       route_ab_pp with the built-in table, then TABLE, twice, labelled "PREFIX<label>".
out=${OUT:-out}
mkdir -p "$out"
parts=${*:-all}
want() { [[ " $parts " == *" $1 "* || " $parts " == *" all "* ]]; }
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
rc=0
# A FROM no value reaches: a table keeping a decision on its SMALL_KERNEL (the old kernel, where
# the built-in table now routes to a new one).
route_ab_never=$(( (1 << 62) ))

route_ab_table() { # path, decision, small kernel, big kernel, first value of the big one
    python3 - "$@" <<'PY'
import json, sys
path, decision, small, big, first = sys.argv[1:6]
table = {"device": {"gpu": "any", "sm_count": 0, "cuda_version": 0}, "decisions": {
    decision: {"bands": [{"kernel": small, "last": int(first) - 1}, {"kernel": big}]}}}
json.dump(table, open(path, "w"))
PY
}

route_ab_pp() { # config, label, table
    local json="/tmp/pp_${2// /_}.json" err="/tmp/pp_${2// /_}.err"
    timeout 240 /tmp/g/ninfer bench --device cuda --config "$1" --random-weights \
        -p 2048,8192 -n 0 -r 3 --warmup 1 --prefill-chunk 8192 --route-table "$3" ${PP_FLAGS:-} -o json \
        > "$json" 2> "$err" || { rc=1; tail -3 "$err"; }
    grep -h "cuDNN" "$err" | sort -u | head -3
    python3 - "$json" "$2" "$out/pp.jsonl" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json:", e); sys.exit(0)
open(sys.argv[3], "a").write(json.dumps({"label": sys.argv[2], "bench": j}) + "\n")
for r in j["results"]:
    print(sys.argv[2], r["test"], {k: v for k, v in r.items() if "tok_s" in k})
PY
}

route_ab_interleaved() { # config, label prefix, built-in label, table label, table
    local round
    for round in 1 2; do
        route_ab_pp "$1" "$2$3" builtin
        route_ab_pp "$1" "$2$4" "$5"
    done
}
