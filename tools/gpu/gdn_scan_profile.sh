#!/usr/bin/env bash
# On the device: why the chunked GDN scan runs as it does, under Nsight Compute. One long prompt
# (1 x 8,192: 64 blocks of 4 warps on 132 SMs, one warp per SM sub-partition) takes 1.43 ms
# against FLA's 0.88, and the serving step's 64 x 1,024 spends ~2x longer per chunk and block.
# Whether the scan is bound by its tensor pipe, by one warp's dependent chain (latency: nothing
# else on its sub-partition to issue), or by its shared-memory and cp.async traffic decides the
# next change (a second warp per sub-partition, by splitting dk or moving the chunk output to
# other warps, or fewer split terms). ncu times tc_prepare_kernel and tc_scan_kernel of
# `bench_prefill_ops gdn_batch 1` (64, 16, 8 x 1,024 and 1 x 8,192 rows) with the pipe and
# stall metrics.
#   GDN_BENCH=/tmp/g/bench_prefill_ops bash tools/gpu/gdn_scan_profile.sh   (files in $OUT/gdn_scan)
# NAME=x (files in $OUT/gdn_scan_x) labels a second run, e.g. with NINFER_GDN_SCAN_SPLIT_DK=0.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}/gdn_scan${NAME:+_$NAME}
mkdir -p "$out"
bin=${GDN_BENCH:-/tmp/g/bench_prefill_ops}
metrics=gpu__time_duration.sum
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__warps_active.avg.per_cycle_active
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,launch__registers_per_thread
# The stall reasons, each as warps stalled per issued instruction.
metrics+=,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio
timeout 240 ncu --kernel-name regex:'tc_(scan|scan_split|prepare)_kernel' --launch-count 16 \
    --metrics "$metrics" --csv --print-units base --log-file "$out/ncu_gdn.csv" \
    "$bin" gdn_batch 1 > "$out/bench.jsonl" 2> "$out/ncu.err" ||
    echo "== ncu failed: $(tail -3 "$out/ncu.err")"
# Per kernel launch: its name, grid and metrics, then its stall reasons, largest first.
python3 tools/gpu/ncu_kernel_metrics.py "$out/ncu_gdn.csv" | tee "$out/summary.txt"

