#!/usr/bin/env bash
# On the device, one command for a whole branch check when starts are scarce, in order of worth:
# the branch's CUDA tests (each W8A8 MoE case in a process of its own: a 35B-shape case spends
# 75-90 s in its FP64 host reference); the 35B's 1k/128 serving benchmark, traced
# (NINFER_STEP_PROFILE=2, tools/gpu/step_trace_table.py: where the server's steps went); the
# chunked GDN scan under Nsight Compute (gdn_scan_profile.sh), and its opt-in dk-split blocks
# A/B'd and profiled; the MoE down kernel's early route A/B (batch-1 fp8 decode, binary_ab.sh);
# a batch-256 decode profile with the time left. A failing test of the branch stops it before
# any measurement (the opt-in kernels' tests only skip their own A/B); a run cut short keeps
# what it wrote.
# Pack first (here): NINFER_NCCL=ON NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer \
#   test_cuda_bundle bench_prefill_ops; then bash tools/gpu/slim_carry.sh on ... and run
#   bash tools/gpu/branch_check.sh      (carry [".deps/gpu.tar.xz"]; logs in $OUT, summary $OUT/log)
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

# Tests, all at once (16 host cores: the FP64 references run side by side).
pids=()
for shape in swapped rows; do
    for c in SmallStacksAgainstQuantizedReference DecodeBatchOnTheQwen35bExperts \
        OtherRanksExpertsAreSkipped Qwen35bExpertsOnSampledRows UntransposedScalesAreCaught; do
        (gate_test "w8a8_${shape}_$c" 300 /tmp/g/test_cuda_bundle \
            --gtest_filter="*CudaMoeW8a8.$c/$shape") > "$out/w_${shape}_$c.out" 2>&1 &
        pids+=($!)
    done
done
(gate_test fp8 300 /tmp/g/test_cuda_bundle \
    --gtest_filter='*CudaMoeFp8*:*CudaLinearFp8*:*CudaRouteTable*:CudaMoeW8a8Route.*-*EarlyRoute*') \
    > "$out/fp8.out" 2>&1 &
pids+=($!)
(gate_test other 300 /tmp/g/test_cuda_bundle --gtest_filter='*GatedDeltaRuleChunked*:CudaDFlashAcceptance.*:*CudaMoeWgmma*:*CudaFixtures*:*SigmoidMul*:*CudaOps.Elementwise*-*SplitDk*') \
    > "$out/other.out" 2>&1 &
pids+=($!)
(gate_test moe_block 300 /tmp/g/test_cuda_bundle --gtest_filter='*CudaMoeBlock*:*CudaMoeGrouped*-*EarlyRoute*') \
    > "$out/moe_block.out" 2>&1 &
pids+=($!)
# The opt-in kernels' tests (the early MoE route, the dk-split GDN scan): their result decides
# their A/Bs and defaults, not whether the branch's own tests let the run go on.
(gate_test optin 300 /tmp/g/test_cuda_bundle --gtest_filter='*EarlyRoute*:*SplitDk*') \
    > "$out/optin.out" 2>&1 &
optin_pid=$!
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
optin_fail=0
wait $optin_pid || optin_fail=1
cat "$out"/w_*.out "$out/fp8.out" "$out/other.out" "$out/moe_block.out" "$out/optin.out" \
    >> "$out/log"
grep -h -B2 -A12 "dflash_acceptance.h" "$out/other.log" | head -60 >> "$out/log"
grep -h "dflash2 demo" "$out/other.log" >> "$out/log"
echo "== tests done in $(elapsed) s: fail=$fail optin_fail=$optin_fail" | tee -a "$out/log"
[ $fail -eq 0 ] || exit 1

# The bf16 35B serves only on a card past 80 GB (H200): there it is issue 12's target model.
config=configs/qwen3.6-35b-a3b-fp8.json
mem_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
[ "${mem_mib:-0}" -gt 100000 ] && config=configs/qwen3.6-35b-a3b.json
serve() { # name, concurrency:prompts, seconds, extra environment...
    local name=$1 conc=$2 limit=$3
    shift 3
    env "$@" CONFIG=$config NINFER_BIN=/tmp/g/ninfer \
        SERVE_FLAGS="--gdn-state-dtype bf16 --max-queue 1024" MAX_BATCH_TOKENS=65536 \
        PREFILL_CHUNK=4096 RANDOM_CONCURRENCY=$conc OUT="$out/$name" \
        timeout "$limit" bash tools/gpu/serve_bench.sh random > /dev/null 2>&1
    cat "$out/$name/summary.txt" >> "$out/log" 2>/dev/null
}
# One traced serving run gives both the 1k/128 figure and where its steps went (the trace's
# per-phase synchronisations cost little beside ~30 ms steps; starts are scarce).
echo "== traced serve ($config) at $(elapsed) s" | tee -a "$out/log"
serve trace 256:1000 240 NINFER_STEP_PROFILE=2
python3 tools/gpu/step_trace_table.py "$out/trace/serve_random.log" >> "$out/log" 2>&1
gzip -9 "$out/trace/serve_random.log" 2>/dev/null
echo "== GDN scan profile at $(elapsed) s" | tee -a "$out/log"
OUT="$out" GDN_BENCH=/tmp/g/bench_prefill_ops timeout 90 bash tools/gpu/gdn_scan_profile.sh \
    >> "$out/log" 2>&1
# The dk-split scan (opt-in) against the default blocks, interleaved, when its tests passed.
if [ $optin_fail -eq 0 ]; then
    echo "== GDN split A/B at $(elapsed) s" | tee -a "$out/log"
    for round in 1 2; do
        for split in 0 1; do
            NINFER_GDN_SCAN_SPLIT_DK=$split timeout 60 /tmp/g/bench_prefill_ops gdn_batch 5 \
                > "$out/gdn_split${split}_r$round.jsonl" 2>&1
            grep -h '"gated_delta_rule' "$out/gdn_split${split}_r$round.jsonl" |
                sed "s/^/split=$split round $round: /" >> "$out/log"
        done
    done
    NAME=split NINFER_GDN_SCAN_SPLIT_DK=1 OUT="$out" GDN_BENCH=/tmp/g/bench_prefill_ops \
        timeout 90 bash tools/gpu/gdn_scan_profile.sh >> "$out/log" 2>&1
fi
# The MoE down kernel's opt-in early route against the default, batch-1 fp8 decode, interleaved.
echo "== early route A/B at $(elapsed) s" | tee -a "$out/log"
OLD=/tmp/g/ninfer NEW=/tmp/g/ninfer NEW_ENV="NINFER_MOE_DOWN_EARLY_ROUTE=1" ROUNDS=2 \
    BENCH_ARGS="-p 512 -n 128 -r 2" CONFIGS=configs/qwen3.6-35b-a3b-fp8.json OUT="$out/early" \
    timeout 150 bash tools/gpu/binary_ab.sh 2>&1 | grep -E "tg128|failed" | tee -a "$out/log"
left=$((budget - $(elapsed)))
echo "== decode profile with ${left} s" | tee -a "$out/log"
[ $left -gt 60 ] && CONFIGS=configs/qwen3.6-35b-a3b-fp8.json N1=2 N2=6 \
    BENCH_ARGS="--batch 256 -p 128 --gdn-state-dtype bf16" OUT="$out/prof" \
    timeout $left bash tools/gpu/decode_profile.sh >> "$out/log" 2>&1
echo "== end at $(elapsed) s" >> "$out/log"
