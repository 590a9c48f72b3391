#!/usr/bin/env bash
# On the device, with a pack of test_cuda_bundle and ninfer (tools/gpu/pack_binaries.sh, carry
# [".deps/gpu.tar.xz"]): the route-table cuda tests (tests/cuda/test_cuda_route_table.cpp),
# stopping on a failure; then `ninfer tune` (its table and log in $OUT); then decode at batch 1 and
# 8 concurrent of the 35B-A3B with the built-in table against the tuned one, in one run (the
# measured effect of tuning; docs/ROUTES.md).
#   bash tools/gpu/tune_check.sh [tests|tune|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
what=${1:-all}
source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
source tools/gpu/gate.sh
rc=0
export NINFER_CACHE_DIR=/tmp/ninfer_cache
if [ "$what" = tests ] || [ "$what" = all ]; then
    gate_test route_tests 300 /tmp/g/test_cuda_bundle --gtest_filter='CudaRouteTable.*'
fi
if [ "$what" = tune ] || [ "$what" = all ]; then
    timeout 400 /tmp/g/ninfer tune --device cuda > "$out/tune.txt" 2> "$out/tune.log" || rc=1
    cat "$out/tune.txt"
    cp "$NINFER_CACHE_DIR"/routes/*.json "$out/" 2>/dev/null || true
fi
source tools/gpu/bench_line.sh
if [ "$what" = bench ] || [ "$what" = all ]; then
    for table in builtin auto builtin auto; do
        bench_line "35b_$table" --config configs/qwen3.6-35b-a3b.json --random-weights \
            --route-table "$table"
    done
fi
exit $rc
