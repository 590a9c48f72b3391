#!/usr/bin/env bash
# On a GPU host without network (the lent H200s): unpack the carried Debian dependencies, build
# the CUDA targets, run the cuda tests and the benchmarks. Logs and JSON go to $OUT (or out/).
#   bash tools/gpu/check.sh [build|tests|ops|bench|all]   (default all; ops = tests + op bench)
# Exits non-zero when the build, a cuda test or a bench fails; a failing cuda test stops what
# follows it (tools/gpu/gate.sh). `tests` is the first step of every GPU run.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
case "$what" in build|tests|ops|bench|all) ;; *) echo "usage: check.sh [build|tests|ops|bench|all]"; exit 2;; esac
jobs=$(nproc)
source tools/gpu/gate.sh
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }

log "unpack deps"
bash tools/deps/unpack_debs.sh > "$out/deps.log" 2>&1 || { log "unpack failed"; exit 1; }
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp:$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$out/summary.txt"
cmake --version | head -1 | tee -a "$out/summary.txt"

log "configure"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNINFER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
log "build"
# Default: ninfer, every CUDA test (tests/cuda/test_*.cpp) and the op benchmarks.
cuda_tests=$(ls tests/cuda/test_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
targets="${TARGETS:-ninfer $cuda_tests bench_prefill_ops bench_decode_ops}"
ninja -C build-gpu -j "$jobs" $targets > "$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -60; exit 1; }
log "built"

if [ "$what" = tests ] || [ "$what" = ops ] || [ "$what" = all ]; then
    log "cuda tests"
    # Every cuda test; a failure stops the script with exit 1 (nothing after it runs).
    gate_test ctest_cuda 420 env OMP_WAIT_POLICY=PASSIVE ctest --test-dir build-gpu -L cuda \
        --output-on-failure -j 4 | tee -a "$out/summary.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
    # A cuda label that matched nothing would pass ctest: refuse an empty run.
    grep -qE "[1-9][0-9]* tests? passed|100% tests passed" "$out/ctest_cuda.log" ||
        { log "FAILED: no cuda test ran"; exit 1; }
fi

if [ "$what" = ops ] || [ "$what" = bench ] || [ "$what" = all ]; then
    log "op bench (T=8192, and one decode token)"
    gate_step bench_prefill_ops bash -o pipefail -c "timeout 300 ./build-gpu/bench/bench_prefill_ops 8192 5 | tee '$out/bench_ops.jsonl' | tee -a '$out/summary.txt'"
    gate_step bench_decode_ops bash -o pipefail -c "timeout 300 ./build-gpu/bench/bench_decode_ops 20 | tee '$out/bench_decode_ops.jsonl' | tee -a '$out/summary.txt'"
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
    for model in qwen3.6-35b-a3b qwen3.6-27b; do
        log "bench $model"
        gate_step "bench $model" timeout ${BENCH_TIMEOUT:-300} ./build-gpu/apps/ninfer/ninfer bench \
            --config "configs/$model.json" --random-weights --device cuda -p 512,8192 -n 128 \
            --pg 2048,384 -r ${BENCH_REPS:-5} --warmup 1 --prefill-chunk 8192 -o json \
            > "$out/bench_$model.json" 2> "$out/bench_$model.err"
        gate_step "bench $model json" python3 - "$out/bench_$model.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("no json:", e); sys.exit(1)
print(j["model"], j["dtype"], "load %.1fs copy %.0f GB/s gemm %.0f TFLOP/s" % (
    j["load_s"], j["ceilings"]["copy_bytes_per_s"] / 1e9, j["ceilings"]["gemm_flops"] / 1e12))
for r in j["results"]:
    s = r["test"]
    if "prefill_tok_s" in r: s += " prefill %.0f tok/s (%.1f TFLOP/s)" % (r["prefill_tok_s"]["mean"], r["prefill_tflops"]["mean"])
    if "decode_tok_s" in r: s += " decode %.1f tok/s (%.1f%% roofline)" % (r["decode_tok_s"]["mean"], 100 * r["decode_roofline_fraction"]["mean"])
    print(" ", s)
print("  memory", j["memory_bytes"])
PY
    done
fi
log "done"
gate_finish | tee -a "$out/summary.txt"
exit "${PIPESTATUS[0]}"
