#!/usr/bin/env bash
# On the device (one 10-minute command): trains the demo model's DFlash2 drafter
# (tools/train_demo/train_dflash.py) on a corpus rebuilt by build_corpus.py (the same held-out
# split as the demo model's, so mtp_eval.json's prompts stay unseen), then measures PyTorch's
# acceptance on those prompts. The drafter and its eval.json come back in $OUT/dflash2/.
#   bash tools/gpu/dflash_train.sh [TRAIN_SECONDS]   (default 240)
# On the H200 the corpus and the target's features take ~130 s and the evaluation ~60-90 s, so
# TRAIN_SECONDS past ~360 leaves a 600 s command no time to evaluate (450 did not: 2026-12-07).
# Such a run's drafter still comes back; evaluate it anywhere afterwards (2.5 min on 2 CPU cores):
#   python3 tools/train_demo/train_dflash.py --model models/ninfer-demo --out DIR --device cpu \
#       --eval-only DIR/../train_dflash.log
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
start=$(date +%s)
echo "== corpus"
python3 tools/train_demo/build_corpus.py --out /tmp/dflash_corpus --max-mb ${CORPUS_MB:-12} \
    --val-mb 0.5 2>&1 | tail -3
echo "== corpus done in $(( $(date +%s) - start )) s"
python3 tools/train_demo/train_dflash.py --model models/ninfer-demo --corpus /tmp/dflash_corpus \
    --out "$out/dflash2" --budget-s "${1:-240}" --device cuda --profile ${TRAIN_ARGS:-} 2>&1 | tee "$out/train_dflash.log"
echo "== done in $(( $(date +%s) - start )) s"
