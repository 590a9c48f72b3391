#!/usr/bin/env bash
# Restores what `run_all.sh --package DIR` packed: the model into models/ninfer-demo/ (replacing
# it) and the evaluation files (val.txt, packages.json, eval.json, summary.json, train log and
# metrics) into out/train_demo/eval/. Then check ninfer with check_ninfer.py (see README).
#
#   bash tools/train_demo/unpack.sh DIR
set -euo pipefail
src=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
ls "$src"/demo.tar.gz.part-* > /dev/null
tmp=$(mktemp -d)
cat "$src"/demo.tar.gz.part-* | tar -xz -C "$tmp"
rm -rf models/ninfer-demo out/train_demo/eval
mkdir -p models out/train_demo
mv "$tmp/ninfer-demo" models/ninfer-demo
mv "$tmp/eval" out/train_demo/eval
rmdir "$tmp"
ls -l models/ninfer-demo out/train_demo/eval
