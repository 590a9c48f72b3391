#!/usr/bin/env bash
# On a GPU host after tools/gpu/check.sh has built build-gpu: the serving benchmark
# (bench/serve/bench_serve.py) against `ninfer serve` on random weights of a config (1k/128
# random prompts and 128/1024 decode-heavy, swept over concurrency) and on the demo model
# (multi-turn chat, prefix-cache hit rate), plus the batch-1 `ninfer bench` in the same run.
# `vision` serves one-turn chats with and without one image each (random weights with the tower;
# Qwen3.6's own preprocessor sizes) at VISION_CONCURRENCY.
#   bash tools/gpu/serve_bench.sh [random|decode|multiturn|batch1|vision|all]...   JSON, logs in $OUT
# NINFER_BIN: the ninfer binary (default build-gpu's; /tmp/g/ninfer after unpack_binaries.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
bin=${NINFER_BIN:-build-gpu/apps/ninfer/ninfer}
config=${CONFIG:-configs/qwen3.6-35b-a3b.json}
port=8321
parts=${*:-all}
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp:$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
want() { [[ " $parts " == *" $1 "* || " $parts " == *" all "* ]]; }

server_pid=""
start_server() { # args: name, serve flags...
    local name=$1; shift
    $bin serve --port $port --device cuda --no-log-requests "$@" > "$out/serve_$name.log" 2>&1 &
    server_pid=$!
    # Up to 600 s for the weights, but not a second past the server's exit: a server that fails
    # at start (a configuration that does not fit: an 80 GB card and the 35B in bf16 at the
    # default context) must not cost the device budget ten minutes of waiting.
    local waited=0
    until python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" \
            > /dev/null 2>&1; do
        if ! kill -0 "$server_pid" 2>/dev/null || [ $waited -ge 600 ]; then
            log "serve $name did not start:"
            tail -3 "$out/serve_$name.log" | tee -a "$out/summary.txt"
            server_pid=""
            return 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
    python3 bench/serve/bench_serve.py --base-url http://127.0.0.1:$port \
        --workload random --num-prompts 1 --input-len 8 --output-len 2 --quiet > /dev/null 2>&1
    grep -E "ninfer:" "$out/serve_$name.log" | tee -a "$out/summary.txt"
}
stop_server() { [ -n "$server_pid" ] && { kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }; }
bench() { # args: output name, bench_serve flags...
    local name=$1; shift
    timeout ${BENCH_TIMEOUT:-400} python3 bench/serve/bench_serve.py --base-url http://127.0.0.1:$port \
        --quiet -o "$out/$name.json" "$@" 2>> "$out/bench_serve.txt"
    python3 - "$out/$name.json" <<'PY' | tee -a "$out/summary.txt"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("no json:", e); sys.exit(0)
for r in j["runs"]:
    print(f'{j["workload"]} C={r["concurrency"]}: {r.get("completed")} ok {r.get("failed")} failed, '
          f'total {r["total_token_throughput"]:.0f} tok/s, output {r["output_throughput"]:.0f} tok/s, '
          f'TTFT p50 {r["median_ttft_ms"]:.0f} p99 {r["p99_ttft_ms"]:.0f} ms, ITL p50 {r["median_itl_ms"]:.1f} '
          f'p99 {r["p99_itl_ms"]:.1f} ms, hit rate {r.get("prefix_cache_hit_rate")}, after first turn {r.get("prefix_cache_hit_rate_after_first_turn")}')
    for e in r.get("error_examples", [])[:2]:  # why requests failed, beside the figures
        print("  failed:", e[:240])
PY
}

# The decode-heavy run's output tok/s against its memory-bandwidth roofline
# (bench/serve/decode_roofline.py: 128/1,024 tokens, so 640 KV tokens a sequence on average) at
# BANDWIDTH bytes/s, else the copy ceiling of this run's `ninfer bench` (batch1, run it first).
decode_roofline() { # args: output name, concurrency
    local bw=${BANDWIDTH:-}
    [ -z "$bw" ] && [ -s "$out/bench_batch1.json" ] &&
        bw=$(python3 -c "import json; print(json.load(open('$out/bench_batch1.json'))['ceilings']['copy_bytes_per_s'])" 2>/dev/null)
    [ -n "$bw" ] || { echo "  (no roofline: run batch1 first or set BANDWIDTH)"; return 0; }
    local tok_s fp8=""
    tok_s=$(python3 -c "import json; print(json.load(open('$out/$1.json'))['runs'][0]['output_throughput'])" 2>/dev/null) || return 0
    grep -q '"quant_method"' "$config" && fp8=--fp8
    local state=f32 # the server's GDN state storage (SERVE_FLAGS="--gdn-state-dtype bf16")
    [[ " ${SERVE_FLAGS:-} " == *" --gdn-state-dtype bf16 "* ]] && state=bf16
    python3 bench/serve/decode_roofline.py --ninfer "$bin" --config "$config" --concurrency "$2" \
        --context 640 --bandwidth "$bw" --output-tok-s "$tok_s" --gdn-state-dtype $state $fp8 |
        sed 's/^/  /' |
        tee -a "$out/summary.txt"
}

if want batch1; then
    log "ninfer bench batch 1 ($config)"
    timeout 300 $bin bench --config "$config" --random-weights --device cuda -n 128 --pg 2048,256 \
        -r 3 --warmup 1 -o json > "$out/bench_batch1.json" 2> "$out/bench_batch1.err"
    python3 -c "
import json,sys; j=json.load(open('$out/bench_batch1.json'))
for r in j['results']:
    if 'decode_tok_s' in r: print(' ', r['test'], 'decode %.1f tok/s (%.1f%% roofline)' % (r['decode_tok_s']['mean'], 100*r['decode_roofline_fraction']['mean']))
" | tee -a "$out/summary.txt"
fi

if want random || want decode; then
    log "serve $config (random weights)"
    start_server random --random-weights --config "$config" --tokenizer models/ninfer-demo \
        --max-batch-tokens ${MAX_BATCH_TOKENS:-8192} --prefill-chunk ${PREFILL_CHUNK:-2048} \
        ${SERVE_FLAGS:-}
    if want random; then
        for c in ${RANDOM_CONCURRENCY:-1:16 8:64 32:128 64:256 128:512 256:1000}; do
            bench random_c${c%%:*} --workload random --concurrency ${c%%:*} --num-prompts ${c##*:} --seed 1
        done
    fi
    if want decode; then
        for c in ${DECODE_CONCURRENCY:-64:64 256:256}; do
            bench decode_c${c%%:*} --workload decode --concurrency ${c%%:*} --num-prompts ${c##*:} --seed 2
            decode_roofline decode_c${c%%:*} ${c%%:*}
        done
    fi
    curl -s http://127.0.0.1:$port/metrics | grep -E "^ninfer_(prefix|kv|preempt|state)" > "$out/metrics_random.txt"
    stop_server
fi

if want vision; then
    # The demo tokenizer's vision ids replace the config's (the ids are all the text side needs),
    # and the preprocessor is Qwen3.6's (256^2 to 4096^2 pixels): a 1024^2 image is 1,024 tokens.
    vdir=/tmp/ninfer_vision_text && rm -rf $vdir && cp -r models/ninfer-demo $vdir
    python3 - "$config" $vdir <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2] + "/config.json"))
for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
    c[k] = d[k]
json.dump(c, open(sys.argv[2] + "/bench_config.json", "w"))
p = json.load(open(sys.argv[2] + "/preprocessor_config.json"))
p["size"] = {"shortest_edge": 65536, "longest_edge": 16777216}
json.dump(p, open(sys.argv[2] + "/preprocessor_config.json", "w"))
PY
    log "serve $config (random weights, vision tower): one image per request against text only"
    start_server vision --random-weights --config $vdir/bench_config.json --tokenizer $vdir \
        --max-batch-tokens ${MAX_BATCH_TOKENS:-8192} --prefill-chunk ${PREFILL_CHUNK:-2048} \
        ${SERVE_FLAGS:-}
    for c in ${VISION_CONCURRENCY:-32:256}; do
        for image in none ${IMAGE_SIZE:-1024x1024}; do
            flags=""
            [ $image != none ] && flags="--image-size $image"
            bench vision_${image}_c${c%%:*} --workload multiturn --turns 1 --concurrency ${c%%:*} \
                --num-conversations ${c##*:} --input-len 64 --output-len 128 --seed 4 $flags
        done
    done
    curl -s http://127.0.0.1:$port/metrics | grep -E "^ninfer_" > "$out/metrics_vision.txt"
    stop_server
fi

if want multiturn; then
    log "serve the demo model (multi-turn)"
    start_server demo --model models/ninfer-demo
    # Qwen3.6's template drops past turns' (empty) think blocks unless preserve_thinking is set:
    # then a turn re-renders exactly what the model generated and resumes from its end.
    for variant in plain preserve; do
        kwargs='{"enable_thinking": false}'
        [ $variant = preserve ] && kwargs='{"enable_thinking": false, "preserve_thinking": true}'
        # THINK_TIME (seconds between a conversation's turns; 0 by default, as the earlier
        # figures) gives next-turn warming the time it works in (docs/SERVING.md).
        bench multiturn_$variant --workload multiturn --concurrency 16 --num-conversations 16 \
            --turns 8 --input-len 48 --output-len 128 --system-prompt-words 64 \
            --chat-template-kwargs "$kwargs" --seed 3 --think-time "${THINK_TIME:-0}"
    done
    curl -s http://127.0.0.1:$port/metrics | grep -E "^ninfer_(prefix|kv|preempt|state)" > "$out/metrics_demo.txt"
    stop_server
fi
log "done"
