#!/usr/bin/env bash
# The peer table (bench/peers/peer_table.py): our one-op benches against FLA, FlashInfer and
# cuBLAS at our shapes, in one run on the device. Here (network):
#   bash tools/gpu/peer_check.sh fetch   # peer wheels -> .deps/peer_wheels (FLA + fla-core +
#                                        # einops: 1.6 MB; FlashInfer's wheel, ~100 MB, is over
#                                        # the 64 MiB carry: add it where a device has room)
#   NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh bench_decode_ops bench_prefill_ops
# On the device (carry [".deps/gpu.tar.xz", ".deps/peer_wheels"]):
#   bash tools/gpu/peer_check.sh run      # table on stdout, rows in $OUT/peers.jsonl
set -uo pipefail
cd "$(dirname "$0")/../.."
case "${1:-run}" in
fetch)
    rm -rf .deps/peer_wheels && mkdir -p .deps/peer_wheels
    pip download -q --no-deps -d .deps/peer_wheels flash-linear-attention==0.6.0 fla-core==0.6.0 \
        einops
    ls -la .deps/peer_wheels ;;
run)
    out=${OUT:-out}
    mkdir -p "$out"
    source tools/gpu/unpack_binaries.sh .deps/gpu.tar.xz
    timeout 500 python3 bench/peers/peer_table.py --bin-dir /tmp/g --wheels .deps/peer_wheels \
        --json "$out/peers.jsonl" 2> "$out/peers.err" | tee "$out/peers.md"
    rc=$?
    tail -5 "$out/peers.err"
    exit $rc ;;
*) echo "usage: $0 fetch|run" >&2; exit 2 ;;
esac
