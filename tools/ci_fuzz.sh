#!/usr/bin/env bash
# Builds every libFuzzer target of fuzz/ in build-asan/ (the clang ASan + UBSan build that
# tools/ci_sanitize.sh tests, so the libraries are compiled once for both) and runs each for
# NINFER_FUZZ_SECONDS (60) from the seeds of fuzz/make_seeds.py, as many at once as there are
# cores. Fails when any fuzzer finds a crash, a sanitizer report, a leak or a timeout; the
# input that did it is left in build-asan/fuzz-runs/<fuzzer>/ (crash-*, leak-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/sanitizers/configure.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build build-asan -j "$jobs" --target ninfer_fuzzers

seconds=${NINFER_FUZZ_SECONDS:-60}
# A fixed seed: the same mutations on every machine, so a CI finding reproduces here (a slower
# machine runs a prefix of the same sequence). NINFER_FUZZ_SEED=0 draws a new one per run.
seed=${NINFER_FUZZ_SEED:-1}
seeds=build-asan/fuzz-seeds
rm -rf "$seeds" build-asan/fuzz-runs
python3 fuzz/make_seeds.py "$seeds"
fuzzers=(fuzz_safetensors fuzz_request_parsers fuzz_tokenizer fuzz_template fuzz_tool_parser
         fuzz_json_constraint)

# One fuzzer: new inputs go to its own scratch corpus (the first directory), never to the seeds.
run_one() {
    local name=$1 dir=build-asan/fuzz-runs/$1
    mkdir -p "$dir/corpus"
    build-asan/fuzz/"$name" -max_total_time="$seconds" -seed="$seed" -timeout=30 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" "$seeds/$name" \
        > "$dir/log.txt" 2>&1
}

failed=()
pids=()
names=()
wait_oldest() {
    if ! wait "${pids[0]}"; then
        failed+=("${names[0]}")
        tail -n 60 "build-asan/fuzz-runs/${names[0]}/log.txt"
    fi
    echo "${names[0]}: $(grep -h -m1 -o 'stat::number_of_executed_units: *[0-9]*' \
        "build-asan/fuzz-runs/${names[0]}/log.txt" | grep -o '[0-9]*$' || echo '?') runs"
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
}
for name in "${fuzzers[@]}"; do
    [ ${#pids[@]} -ge "$jobs" ] && wait_oldest
    run_one "$name" &
    pids+=($!)
    names+=("$name")
done
while [ ${#pids[@]} -gt 0 ]; do wait_oldest; done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzers failed: ${failed[*]} (inputs in build-asan/fuzz-runs/)" >&2
    exit 1
fi
echo "fuzzers ran ${seconds}s each without a finding: ${fuzzers[*]}"
