#!/usr/bin/env bash
# On the device, one command for what main's opt-in switches and open gates need, in order of
# worth (a run cut short keeps what it wrote; starts are scarce):
# 1. the CUDA tests of the fused GDN decode kernel's builds (CudaGdnCore.DecodeOnEveryBuild), the
#    GDN state and dk-split scan tests, and the DFlash acceptance gates (bf16 against PyTorch's
#    bf16 figures);
# 2. the fused GDN decode kernel's six builds (row-group blocks: NINFER_GDN_CORE_BLOCKS=1|2 x
#    NINFER_GDN_CORE_EARLY_STATE=0|1; column blocks: NINFER_GDN_CORE_COLUMNS=1 x early 0|1)
#    A/B'd, interleaved: the fp8 35B at a decode batch of 256 (two rounds; the kernel was 39% of
#    that step) and at batch 1;
# 3. one traced 1k/128 serving run at 256 concurrent and 1,000 requests: the bf16 35B on a card
#    past 100 GB (issue 12's target model), else the fp8 35B;
# 4. the GDN prefill pass (tc_prepare_kernel, 42% of the chunked GDN's time at 64 x 1,024 rows)
#    under Nsight Compute's source view: per-SASS shared-memory wavefronts and stalls.
# Pack first (here): NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer \
#   test_cuda_bundle bench_prefill_ops; then bash tools/gpu/slim_carry.sh on ... and run
#   bash tools/gpu/next_check.sh      (carry [".deps/gpu.tar.xz"]; logs in $OUT, summary $OUT/log)
# BUDGET_S (default 570): the seconds the whole command may take.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
out=${OUT:-out}
mkdir -p "$out"
budget=${BUDGET_S:-570}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$out/log"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }

# 1. Tests, side by side (16 host cores: the FP64 references run in parallel).
(gate_test core 240 /tmp/g/test_cuda_bundle \
    --gtest_filter='*CudaGdnCore*:*CudaGdnState*:*GatedDeltaRuleChunkedSplitDk*') \
    > "$out/core.out" 2>&1 &
core_pid=$!
(gate_test dflash 240 /tmp/g/test_cuda_bundle --gtest_filter='CudaDFlashAcceptance.*') \
    > "$out/dflash.out" 2>&1 &
dflash_pid=$!
core_fail=0
wait $core_pid || core_fail=1
wait $dflash_pid
cat "$out/core.out" "$out/dflash.out" >> "$out/log"
grep -h -B2 -A12 "dflash_acceptance.h" "$out/dflash.log" 2>/dev/null | head -60 >> "$out/log"
grep -h "dflash2 demo" "$out/dflash.log" >> "$out/log" 2>/dev/null
echo "== tests done in $(elapsed) s: core_fail=$core_fail" | tee -a "$out/log"

# 2. The fused GDN decode kernel's builds, interleaved.
fp8=configs/qwen3.6-35b-a3b-fp8.json
bench_arm() { # label, blocks, early, columns, bench arguments...
    local label=$1 blocks=$2 early=$3 columns=$4
    shift 4
    local json="$out/core_ab_$label.json"
    if NINFER_GDN_CORE_BLOCKS=$blocks NINFER_GDN_CORE_EARLY_STATE=$early \
        NINFER_GDN_CORE_COLUMNS=$columns timeout 120 \
        /tmp/g/ninfer bench --config $fp8 --random-weights --device cuda --warmup 1 "$@" \
        -o json > "$json" 2> "$out/core_ab.err"; then
        python3 tools/gpu/bench_lines.py "$json" --label "$label" | tee -a "$out/log"
    else
        echo "== $label failed: $(tail -2 "$out/core_ab.err")" | tee -a "$out/log"
    fi
}
if [ $core_fail -eq 0 ]; then
    echo "== gdn_core builds A/B at $(elapsed) s" | tee -a "$out/log"
    arms=("1 0 0" "2 0 0" "1 1 0" "2 1 0" "1 0 1" "1 1 1")
    for round in 1 2; do
        for arm in "${arms[@]}"; do
            set -- $arm
            bench_arm "b256_blocks$1_early$2_columns$3_r$round" "$1" "$2" "$3" --batch 256 \
                -p 128 -n 64 -r 1 --gdn-state-dtype bf16
        done
    done
    for arm in "${arms[@]}"; do
        set -- $arm
        bench_arm "b1_blocks$1_early$2_columns$3" "$1" "$2" "$3" -p 512 -n 128 -r 2
    done
fi

# 3. The 1k/128 serving run, traced.
config=$fp8
mem_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
[ "${mem_mib:-0}" -gt 100000 ] && config=configs/qwen3.6-35b-a3b.json
echo "== traced serve ($config) at $(elapsed) s" | tee -a "$out/log"
CONFIG=$config NINFER_BIN=/tmp/g/ninfer NINFER_STEP_PROFILE=2 \
    SERVE_FLAGS="--gdn-state-dtype bf16 --max-queue 1024" MAX_BATCH_TOKENS=65536 \
    PREFILL_CHUNK=4096 RANDOM_CONCURRENCY=256:1000 OUT="$out/trace" \
    timeout 240 bash tools/gpu/serve_bench.sh random > /dev/null 2>&1
cat "$out/trace/summary.txt" >> "$out/log" 2>/dev/null
python3 tools/gpu/step_trace_table.py "$out/trace/serve_random.log" >> "$out/log" 2>&1
gzip -9 "$out/trace/serve_random.log" 2>/dev/null

# 4. The GDN prefill pass per SASS instruction (64 x 1,024 rows: the serving step's shape).
left=$((budget - $(elapsed)))
echo "== tc_prepare source profile with ${left} s" | tee -a "$out/log"
if [ $left -gt 60 ]; then
    timeout $((left - 10)) ncu --kernel-name regex:tc_prepare_kernel --launch-count 1 \
        --section SourceCounters --section MemoryWorkloadAnalysis_Tables --export "$out/prep" \
        /tmp/g/bench_prefill_ops gdn_batch 1 > /dev/null 2> "$out/prep.err" &&
        ncu --import "$out/prep.ncu-rep" --page source --csv --print-source sass \
            > "$out/prep_sass.csv" 2>> "$out/prep.err" &&
        ncu --import "$out/prep.ncu-rep" --page details --csv > "$out/prep_details.csv" 2>&1
    gzip -9 "$out/prep_sass.csv" "$out/prep.ncu-rep" 2>/dev/null
    tail -3 "$out/prep.err" >> "$out/log"
fi
echo "== end at $(elapsed) s" >> "$out/log"
